package subagent

import "github.com/subflow-dev/subflow/harness/session"

// ToolError renders a failure as a tool result text: `Error: <msg>` (contract R-8).
func ToolError(msg string) string { return "Error: " + msg }

// RenderResult renders a result as the subagent tool's text for a parent model (contract R-8).
// A completed run renders as its output text. Any other run renders as a one-line
// explanation, followed by the partial output when the run produced text before it ended.
func RenderResult(r Result) string {
	text := session.JoinText(r.Output)
	var msg string
	switch r.StopReason {
	case StopCompleted:
		return text
	case StopAborted:
		msg = "subagent run was cancelled"
	case StopError:
		msg = "subagent run failed"
	case StopMaxTokens:
		msg = "subagent run hit its token limit before finishing"
	case StopRefusal:
		msg = "subagent declined the task"
	default:
		msg = "subagent run ended abnormally (" + string(r.StopReason) + ")"
	}
	if text != "" {
		msg += "\nPartial output before the run ended:\n" + text
	}
	return msg
}
