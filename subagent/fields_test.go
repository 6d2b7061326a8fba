package subagent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/subflow-dev/subflow/harness/session"
)

// TestCheckFields: every field a run could not honour is refused with its rule and a
// message naming the field, and the limits themselves pass.
func TestCheckFields(t *testing.T) {
	task := []session.Block{session.Text("task")}
	for _, tc := range []struct {
		name string
		req  Request
		rule string
		msg  string
	}{
		{"a text prompt passes", Request{Prompt: task}, "", ""},
		{"a tool-call block passes", Request{Prompt: []session.Block{{Type: session.BlockToolCall, ID: "c", Name: "read_file"}}}, "", ""},
		{"a label at the limit passes", Request{Prompt: task, Label: strings.Repeat("x", MaxAttributeBytes-2)}, "", ""},
		{"no prompt", Request{}, RuleMissingPrompt, "subagent request has no prompt: request.prompt needs at least one block"},
		{"an image block", Request{Prompt: []session.Block{session.Text("a"), {Type: "image"}}}, RuleUnsupportedBlock,
			`subagent request.prompt[1] has type "image": a prompt holds "text" and "tool-call" blocks only`},
		{"a label over the limit", Request{Prompt: task, Label: strings.Repeat("x", MaxAttributeBytes-1)}, RuleInvalidLabel,
			"subagent request.label is 2049 bytes encoded, over the server's limit of 2048 bytes for a search attribute"},
		{"a label not UTF-8", Request{Prompt: task, Label: "\xff"}, RuleInvalidLabel, "subagent request.label is not valid UTF-8"},
		{"negative maxTokens", Request{Prompt: task, AgentOptions: session.Route{MaxTokens: -5}}, RuleInvalidTokens,
			"subagent request.agentOptions.maxTokens must be a non-negative safe integer: -5"},
		{"negative tokenBudget", Request{Prompt: task, AgentOptions: session.Route{TokenBudget: -1}}, RuleInvalidTokens,
			"subagent request.agentOptions.tokenBudget must be a non-negative safe integer: -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFields(tc.req)
			if tc.rule == "" {
				assert.NoError(t, err)
				return
			}
			assert.Equal(t, &ValidationError{Rule: tc.rule, Message: tc.msg}, err)
		})
	}
}
