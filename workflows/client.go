package workflows

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/subagent"
)

// StartOptions are the inputs of Start.
type StartOptions struct {
	// WorkflowID defaults to WorkflowID(Input.ChildID).
	WorkflowID string
	// TaskQueue defaults to TaskQueue.
	TaskQueue string
	// Input is the workflow input. When Input.ChildID is empty, Start generates it, so the
	// default workflow id and the child id share one UUID.
	Input StartInput
}

// StartWorkflowOptions returns the options StartSubagent is started with: the workflow id,
// the task queue (TaskQueue when empty), a failing id-conflict policy, the UI summary and
// details (Summary, Details) and the search attributes known at start.
func StartWorkflowOptions(workflowID, taskQueue string, in StartInput) client.StartWorkflowOptions {
	if taskQueue == "" {
		taskQueue = TaskQueue
	}
	return client.StartWorkflowOptions{
		ID:                       workflowID,
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		StaticSummary:            Summary(in),
		StaticDetails:            Details(in),
		TypedSearchAttributes:    temporal.NewSearchAttributes(startAttributes(in)...),
	}
}

// Start starts StartSubagent with Update-with-Start and returns as soon as the child is
// published (SPEC R-71), with the workflow run to wait on for the Outcome.
//
// A request rejected before publication returns a *subagent.ValidationError whose Error()
// is exactly the SPEC message and whose Rule names the rule. A run cancelled before
// publication returns an error wrapping a *temporal.CanceledError. Other failures are
// wrapped with the workflow id.
func Start(ctx context.Context, c client.Client, opts StartOptions) (Published, client.WorkflowRun, error) {
	in := opts.Input
	if in.ChildID == "" {
		in.ChildID = uuid.NewString()
	}
	id := opts.WorkflowID
	if id == "" {
		id = WorkflowID(in.ChildID)
	}
	op := c.NewWithStartWorkflowOperation(StartWorkflowOptions(id, opts.TaskQueue, in), StartSubagent, in)
	handle, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   UpdatePublished,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return Published{}, nil, startError(id, err)
	}
	var pub Published
	if err := handle.Get(ctx, &pub); err != nil {
		return Published{}, nil, startError(id, err)
	}
	run, err := op.Get(ctx)
	if err != nil {
		return Published{}, nil, fmt.Errorf("workflows: start %s: %w", id, err)
	}
	return pub, run, nil
}

func startError(workflowID string, err error) error {
	if ve := Rejection(err); ve != nil {
		return ve
	}
	return fmt.Errorf("workflows: start %s: %w", workflowID, err)
}

// Rejection returns the request rejection err carries — an update failure of Start or the
// failure of a StartSubagent run — as a *subagent.ValidationError with the exact message
// and the rule, or nil when err is no rejection.
func Rejection(err error) *subagent.ValidationError {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !isRejectionType(appErr.Type()) {
		return nil
	}
	return &subagent.ValidationError{Rule: appErr.Type(), Message: appErr.Message()}
}

// Describe returns the status of a run: the workflow's status query, with Progress filled
// from the heartbeat details of its pending Drive or RunSDKChild activity, when there is
// one. Heartbeat details are decoded with the default data converter. runID may be empty
// (the latest run).
func Describe(ctx context.Context, c client.Client, workflowID, runID string) (Status, error) {
	var st Status
	val, err := c.QueryWorkflow(ctx, workflowID, runID, QueryStatus)
	if err != nil {
		return Status{}, fmt.Errorf("workflows: query status of %s: %w", workflowID, err)
	}
	if err := val.Get(&st); err != nil {
		return Status{}, fmt.Errorf("workflows: decode status of %s: %w", workflowID, err)
	}
	if st.Phase != PhasePublishing && st.Phase != PhaseDriving {
		return st, nil
	}
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		return Status{}, fmt.Errorf("workflows: describe %s: %w", workflowID, err)
	}
	for _, pa := range desc.GetPendingActivities() {
		name := pa.GetActivityType().GetName()
		if (name != ActivityDrive && name != ActivityRunSDKChild) || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var p Progress
		if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p); err != nil {
			return Status{}, fmt.Errorf("workflows: decode progress of %s: %w", workflowID, err)
		}
		st.Progress = &p
	}
	return st, nil
}
