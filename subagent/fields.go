package subagent

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/subflow-dev/subflow/harness/session"
)

// MaxAttributeBytes is the most bytes the Temporal server accepts for one search attribute
// value, encoded (the default of its per-value size limit): a label, which every run carries
// as SubagentLabel, must fit, or the server terminates the run after it wrote its sessions.
const MaxAttributeBytes = 2048

// CheckFields rejects, without I/O, a request whose fields no run could honour, each with a
// message naming the field: no prompt (a start without `request` has none), a prompt block
// other than text or tool-call (it would be dropped), a label that is not UTF-8 or whose
// encoded search attribute value exceeds MaxAttributeBytes, and an agentOptions maxTokens or
// tokenBudget outside [0, 2^53−1]. Every failure is a *ValidationError.
func CheckFields(req Request) error {
	if len(req.Prompt) == 0 {
		return Rejectf(RuleMissingPrompt, "subagent request has no prompt: request.prompt needs at least one block")
	}
	for i, b := range req.Prompt {
		if b.Type != session.BlockText && b.Type != session.BlockToolCall {
			return Rejectf(RuleUnsupportedBlock, "subagent request.prompt[%d] has type %q: a prompt holds %q and %q blocks only",
				i, b.Type, session.BlockText, session.BlockToolCall)
		}
	}
	if !utf8.ValidString(req.Label) {
		return Rejectf(RuleInvalidLabel, "subagent request.label is not valid UTF-8")
	}
	if raw, _ := json.Marshal(req.Label); len(raw) > MaxAttributeBytes {
		return Rejectf(RuleInvalidLabel, "subagent request.label is %d bytes encoded, over the server's limit of %d bytes for a search attribute",
			len(raw), MaxAttributeBytes)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"maxTokens", req.AgentOptions.MaxTokens}, {"tokenBudget", req.AgentOptions.TokenBudget}} {
		if f.v < 0 || f.v > session.MaxSafeInteger {
			return Rejectf(RuleInvalidTokens, "subagent request.agentOptions.%s must be a non-negative safe integer: %d", f.name, f.v)
		}
	}
	return nil
}
