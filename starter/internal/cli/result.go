package cli

import (
	"context"
	"io"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/workflows"
)

// runResult waits for the result of a run and exits with its stop reason, like run. A
// cancelled run gives the aborted outcome its cancellation carried.
func runResult(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter result", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object: workflowId, runId, childId, depth, stopReason, output, structured")
	c, id, code, ok := dialID(ctx, fs, args, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	desc, ok := describeOrReport(ctx, c, fs, id, stderr)
	if !ok {
		return exitError
	}
	wr := c.GetWorkflow(ctx, id, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	var out workflows.Outcome
	if err := wr.Get(ctx, &out); err != nil {
		if out, err = outcomeOf(err); err != nil {
			return reportFailure(stderr, id, err)
		}
	}
	// A big result travels by reference; the workers of the run's task queue read it.
	taskQueue := desc.GetExecutionConfig().GetTaskQueue().GetName()
	if err := subflow.ResolveOutcome(ctx, c, taskQueue, &out); err != nil {
		return reportFailure(stderr, id, err)
	}
	return report(stdout, stderr, newResultJSON(id, wr.GetRunID(), out), *asJSON)
}
