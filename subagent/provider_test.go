package subagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

var (
	allCaps = Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
	noCaps  = Capabilities{}
)

func ptr[T any](v T) *T { return &v }

// TestCheckStart runs the start checks against the provider table, plus a provider of
// schema-only capabilities checked by CheckRequest.
func TestCheckStart(t *testing.T) {
	check := func(provider string, req Request) error {
		if req.Prompt == nil {
			req.Prompt = []session.Block{session.Text("task")} // CheckFields has its own test
		}
		if provider == "schema-only" {
			return CheckRequest(provider, Capabilities{OutputSchema: true}, req)
		}
		return CheckStart(provider, req)
	}

	okSchema := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		name     string
		provider string
		req      Request
		rule     string
		msg      string
	}{
		{"plain request passes", "spawn", Request{}, "", ""},
		{"everything supported passes", "spawn", Request{OutputSchema: okSchema, MaxDepth: ptr(int64(0)),
			ToolFilter: &ToolFilter{}, Persona: "p"}, "", ""},
		{"plain request to sdk passes", "sdk", Request{OutputSchema: json.RawMessage("null")}, "", ""},
		{"unknown provider", "nope", Request{}, RuleUnknownProvider,
			`no subagent provider registered for "nope"`},
		{"unknown provider comes before capabilities", "nope", Request{Persona: "p"}, RuleUnknownProvider,
			`no subagent provider registered for "nope"`},
		{"outputSchema", "sdk", Request{OutputSchema: okSchema}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "outputSchema" capability`},
		{"outputSchema first of all", "sdk", Request{OutputSchema: okSchema, MaxDepth: ptr(int64(1)),
			ToolFilter: &ToolFilter{}, Persona: "p"}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "outputSchema" capability`},
		{"depthLimit asked by maxDepth", "sdk", Request{MaxDepth: ptr(int64(1)), ToolFilter: &ToolFilter{}, Persona: "p"},
			RuleUnsupportedCapability, `subagent provider "sdk" does not support the "depthLimit" capability`},
		{"toolFilter", "sdk", Request{ToolFilter: &ToolFilter{}, Persona: "p"}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "toolFilter" capability`},
		{"persona", "sdk", Request{Persona: "p"}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "persona" capability`},
		{"schema supported, depth not", "schema-only", Request{OutputSchema: okSchema, MaxDepth: ptr(int64(1))},
			RuleUnsupportedCapability, `subagent provider "schema-only" does not support the "depthLimit" capability`},
		{"capability before maxDepth value", "sdk", Request{MaxDepth: ptr(int64(-1))}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "depthLimit" capability`},
		{"negative maxDepth", "spawn", Request{MaxDepth: ptr(int64(-1))}, RuleInvalidMaxDepth,
			"subagent maxDepth must be a non-negative safe integer"},
		{"maxDepth past 2^53-1", "spawn", Request{MaxDepth: ptr(int64(1 << 53))}, RuleInvalidMaxDepth,
			"subagent maxDepth must be a non-negative safe integer"},
		{"maxDepth 2^53-1 passes", "spawn", Request{MaxDepth: ptr(int64(1<<53 - 1))}, "", ""},
		{"maxDepth before schema", "spawn", Request{MaxDepth: ptr(int64(-1)), OutputSchema: json.RawMessage(`{}`)},
			RuleInvalidMaxDepth, "subagent maxDepth must be a non-negative safe integer"},
		{"schema not object-rooted", "spawn", Request{OutputSchema: json.RawMessage(`{"type":"string"}`)},
			RuleUnsupportedSchema, `unsupported JSON schema: schema.type must be "object" (structured output is object-rooted)`},
		{"schema outside the subset", "spawn", Request{OutputSchema: json.RawMessage(`{"type":"object","$ref":"#"}`)},
			RuleUnsupportedSchema, `unsupported JSON schema: schema.$ref is not a supported keyword`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := check(tt.provider, tt.req)
			if tt.msg == "" {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tt.msg, err.Error())
			assert.Equal(t, tt.rule, ve.Rule)
		})
	}
}
