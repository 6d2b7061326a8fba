package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	subflow "github.com/subflow-dev/subflow/client"
	"github.com/subflow-dev/subflow/workflows"
)

// runResult waits for the result of a run and exits with its stop reason, like run. A
// cancelled run gives the aborted outcome its cancellation carried.
func runResult(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("starter result", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON object: workflowId, runId, childId, depth, stopReason, output, structured")
	id, code, ok := parseID(fs, args)
	if !ok {
		return code
	}
	c, err := dial(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	defer c.Close()
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		fmt.Fprintf(stderr, "starter result: %s: %v\n", id, err)
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
