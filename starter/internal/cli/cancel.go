package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// runCancel cancels a run: its child is aborted and the run ends Canceled with the partial
// output (contract R-72). It returns once the server accepted the request; `starter result ID`
// waits for the aborted outcome. A run that is already closed is not cancelled: cancel
// exits 1 naming its status.
func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter cancel", stderr)
	c, id, code, ok := dialID(ctx, fs, args, stderr)
	if !ok {
		return code
	}
	defer c.Close()
	desc, ok := describeOrReport(ctx, c, fs, id, stderr)
	if !ok {
		return exitError
	}
	info := desc.GetWorkflowExecutionInfo()
	if st := info.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		fmt.Fprintf(stderr, "starter cancel: workflow %s is closed (%s); nothing to cancel\n", id, statusName(st))
		return exitError
	}
	err := c.CancelWorkflow(ctx, id, info.GetExecution().GetRunId())
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// It closed between the describe and the cancel.
			fmt.Fprintf(stderr, "starter cancel: workflow %s is closed (%s); nothing to cancel\n", id, closedStatus(ctx, c, id))
			return exitError
		}
		fmt.Fprintf(stderr, "starter cancel: %s: %v\n", id, err)
		return exitError
	}
	fmt.Fprintf(stdout, "cancel requested for %s\n", id)
	return exitCompleted
}

// statusName is the lower-case name of a workflow execution status: completed, canceled,
// failed, terminated, timed-out, continued-as-new.
func statusName(st enumspb.WorkflowExecutionStatus) string {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed-out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued-as-new"
	}
	return strings.ToLower(st.String())
}

// closedStatus is the status name of a closed workflow, "closed" when it cannot be read.
func closedStatus(ctx context.Context, c client.Client, id string) string {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return "closed"
	}
	return statusName(desc.GetWorkflowExecutionInfo().GetStatus())
}
