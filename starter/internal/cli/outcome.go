package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// exitCode maps a stop reason to the exit code of run and result (contract R-81).
func exitCode(stop subagent.StopReason) int {
	switch stop {
	case subagent.StopCompleted:
		return exitCompleted
	case subagent.StopAborted:
		return exitAborted
	case subagent.StopMaxTokens:
		return exitMaxTokens
	case subagent.StopRefusal:
		return exitRefusal
	default:
		return exitError
	}
}

// resultJSON is the --json object of run and result.
type resultJSON struct {
	WorkflowID string              `json:"workflowId"`
	RunID      string              `json:"runId"`
	ChildID    string              `json:"childId"`
	Depth      int64               `json:"depth"`
	StopReason subagent.StopReason `json:"stopReason,omitempty"`
	Output     string              `json:"output"`
	Structured json.RawMessage     `json:"structured"`
	// EndMessage is why the child's turn ended, when an error ended it.
	EndMessage string `json:"endMessage,omitempty"`
}

func newResultJSON(workflowID, runID string, out workflows.Outcome) resultJSON {
	structured := out.Result.Structured
	if len(structured) == 0 {
		structured = json.RawMessage("null")
	}
	return resultJSON{
		WorkflowID: workflowID,
		RunID:      runID,
		ChildID:    out.ChildID,
		Depth:      out.Depth,
		StopReason: out.Result.StopReason,
		Output:     session.JoinText(out.Result.Output),
		Structured: structured,
		EndMessage: out.EndMessage,
	}
}

// outcomeOf interprets the error of a StartSubagent run's Get (workflows.RunOutcome): a
// Canceled run gives its aborted outcome and no error, a rejection its
// *subagent.ValidationError.
func outcomeOf(err error) (workflows.Outcome, error) {
	out, err := workflows.RunOutcome(workflows.Outcome{}, err)
	if temporal.IsCanceledError(err) {
		return out, nil
	}
	return out, err
}

// report prints an outcome — as one JSON object with asJSON, else the output text and the
// structured value on stdout and a non-completed stop reason on stderr — and returns the
// exit code.
func report(stdout, stderr io.Writer, res resultJSON, asJSON bool) int {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "starter: write result: %v\n", err)
			return exitError
		}
		return exitCode(res.StopReason)
	}
	if res.Output != "" {
		fmt.Fprintln(stdout, res.Output)
	}
	if string(res.Structured) != "null" {
		fmt.Fprintln(stdout, string(res.Structured))
	}
	if res.StopReason != subagent.StopCompleted {
		why := ""
		if res.EndMessage != "" {
			why = ": " + res.EndMessage
		}
		fmt.Fprintf(stderr, "starter: %s ended %s (child %s)%s\n", res.WorkflowID, res.StopReason, res.ChildID, why)
	}
	return exitCode(res.StopReason)
}
