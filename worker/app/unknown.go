package app

import (
	"fmt"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/workflows"
)

// UnknownWorkflowType is the error type of a run whose workflow type this worker does not
// register (unknownWorkflow).
const UnknownWorkflowType = "UnknownWorkflowType"

// unknownWorkflow serves every workflow type the worker does not register: a starter newer
// than the workers started one (docs/compatibility.md, "Mixed releases"). Without it the
// run's first workflow task would fail and be retried for as long as no worker knows the
// type, with the starter waiting on it; instead the start is refused, the run fails at once
// and both say which side to upgrade. A Start of StartSubagent's shape (Update-with-Start on
// UpdatePublished) gets the message as its update's rejection.
func unknownWorkflow(build string) func(workflow.Context, converter.EncodedValues) error {
	return func(ctx workflow.Context, _ converter.EncodedValues) error {
		name := workflow.GetInfo(ctx).WorkflowType.Name
		msg := fmt.Sprintf("workflow type %q is unknown to this subflow worker (build %s): the starter is newer than the workers; upgrade the workers", name, build)
		err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.UpdatePublished,
			func(workflow.Context) error { return nil },
			workflow.UpdateHandlerOptions{Validator: func(workflow.Context) error {
				return temporal.NewNonRetryableApplicationError(msg, UnknownWorkflowType, nil)
			}})
		if err != nil {
			return err
		}
		// Let an update that came with the start be refused before the run closes.
		_ = workflow.Sleep(ctx, 0)
		return temporal.NewNonRetryableApplicationError(msg, UnknownWorkflowType, nil)
	}
}
