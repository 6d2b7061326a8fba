// Package subflow starts and inspects subagent runs from outside a worker: the starter CLI,
// tests and users' programs call it with a Temporal client. It holds no workflow code.
package subflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/workflows"
)

// StartOptions are the inputs of Start.
type StartOptions struct {
	// WorkflowID defaults to workflows.WorkflowID(Input.ChildID).
	WorkflowID string
	// TaskQueue defaults to workflows.TaskQueue.
	TaskQueue string
	// Input is the workflow input. When Input.ChildID is empty, Start generates it, so the
	// default workflow id and the child id share one UUID.
	Input workflows.StartInput
	// Namespace is the client's namespace (default "default"): Start removes from it a run
	// its worker rejected, which a client cannot name by itself.
	Namespace string
	// Priority is the run's task-queue priority and fairness, which its activities and
	// children inherit; a PriorityKey of 0 means workflows.RunPriority, ahead of batch tasks.
	Priority temporal.Priority
}

// StartWorkflowOptions returns the options workflows.StartSubagent is started with: the workflow id,
// the task queue (workflows.TaskQueue when empty), a failing id-conflict policy, and the
// run's workflows.StartMetadataOf (the UI summary and details, the search attributes known at
// start), as a batch or a nested delegation starts its children.
func StartWorkflowOptions(workflowID, taskQueue string, in workflows.StartInput) tclient.StartWorkflowOptions {
	if taskQueue == "" {
		taskQueue = workflows.TaskQueue
	}
	m := workflows.StartMetadataOf(in)
	return tclient.StartWorkflowOptions{
		ID:                       workflowID,
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		StaticSummary:            m.Summary,
		StaticDetails:            m.Details,
		TypedSearchAttributes:    m.SearchAttributes,
	}
}

// Start starts workflows.StartSubagent with Update-with-Start and returns as soon as the child is
// published (contract R-71), with the workflow run to wait on for the Outcome.
//
// The run starts on the task queue RouteWorkspace picks for its cwd (opts.TaskQueue unless a
// worker serves the cwd's root host-locally), so all its workflow tasks and activities run
// where its cwd exists; a cwd no worker serves is rejected before anything starts. An
// interactive run (the default priority, workflows.Interactive) starts on that queue's
// interactive lane when the workers serve it there (laneOf).
//
// A workflow id in subflow's own namespace (workflows.ReservedIDPrefix) or over the server's
// length limit, and an input workflows.CheckInput refuses, are refused before anything
// starts. A request rejected before publication returns a *subagent.ValidationError whose
// Error() is exactly the contract's message and whose Rule names the rule; a run its worker
// rejected (what only the worker can check: the parent session, the cwd, the child id)
// wrote nothing, and Start deletes it from opts.Namespace, so a rejection leaves no Failed
// run. A run cancelled before publication returns an error wrapping a
// *temporal.CanceledError. Other failures are wrapped with the workflow id.
func Start(ctx context.Context, c tclient.Client, opts StartOptions) (workflows.Published, tclient.WorkflowRun, error) {
	in := opts.Input
	if in.ChildID == "" {
		in.ChildID = uuid.NewString()
	}
	id := opts.WorkflowID
	if id == "" {
		id = workflows.WorkflowID(in.ChildID)
	} else if err := workflows.CheckUserWorkflowID(id); err != nil {
		return workflows.Published{}, nil, err
	}
	if err := workflows.CheckInput(in); err != nil {
		return workflows.Published{}, nil, err
	}
	prio := opts.Priority
	prio.PriorityKey = cmp.Or(prio.PriorityKey, workflows.RunPriority)
	if err := workflows.CheckPriority(prio); err != nil {
		return workflows.Published{}, nil, fmt.Errorf("subflow: start %s: %w", id, err)
	}
	queue, err := RouteWorkspace(ctx, c, cmp.Or(opts.TaskQueue, workflows.TaskQueue), in.Cwd())
	if err != nil {
		return workflows.Published{}, nil, err
	}
	if workflows.Interactive(prio) {
		queue = laneOf(ctx, c, queue)
	}
	sopts := StartWorkflowOptions(id, queue, in)
	sopts.Priority = prio
	op := c.NewWithStartWorkflowOperation(sopts, workflows.StartSubagent, in)
	handle, err := c.UpdateWithStartWorkflow(ctx, tclient.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: tclient.UpdateWorkflowOptions{
			UpdateName:   workflows.UpdatePublished,
			WaitForStage: tclient.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return workflows.Published{}, nil, startError(id, err)
	}
	var pub workflows.Published
	if err := handle.Get(ctx, &pub); err != nil {
		if ve := workflows.Rejection(err); ve != nil {
			// Refused by the worker (a parent or cwd only it can see, a child id taken)
			// before it wrote anything: once the run failed with the rejection the
			// caller gets (a run still replying to its update is not deleted), it is
			// removed too, so a rejected start leaves nothing behind.
			_ = c.GetWorkflow(ctx, id, handle.RunID()).Get(ctx, nil)
			deleteRejected(context.WithoutCancel(ctx), c, cmp.Or(opts.Namespace, "default"), id, handle.RunID())
			return workflows.Published{}, nil, ve
		}
		return workflows.Published{}, nil, startError(id, err)
	}
	run, err := op.Get(ctx)
	if err != nil {
		return workflows.Published{}, nil, fmt.Errorf("subflow: start %s: %w", id, err)
	}
	return pub, run, nil
}

// laneOf is the task queue an interactive run bound for queue starts on: queue's
// interactive lane (workflows.InteractiveQueue) when the workers the lane routes new runs to
// poll its workflow tasks, so that none of the run's tasks waits behind a batch's; else, and
// when the lane cannot be read, queue itself, where the run still goes ahead of queued batch
// tasks by its priority. Workers of a build that predates workflows on the lane, or of a
// version not yet current, poll none, and the run starts on queue as before.
func laneOf(ctx context.Context, c tclient.Client, queue string) string {
	if workflows.IsInteractiveQueue(queue) {
		return queue
	}
	lane := workflows.InteractiveQueue(queue)
	q, err := ReadQueueVersions(ctx, c, lane)
	if err != nil || !q.Served() {
		return queue
	}
	return lane
}

// deleteRejected deletes the closed run runID of workflowID, which its worker rejected, and
// waits until the server no longer describes it, asking again each second for up to 10 s: a
// delete that lands while the run's close is still being recorded can leave the run in
// place. Failures are ignored; the rejection is what the caller reports.
func deleteRejected(ctx context.Context, c tclient.Client, namespace, workflowID, runID string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		_, _ = c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace:         namespace,
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID},
		})
		_, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func startError(workflowID string, err error) error {
	if ve := workflows.Rejection(err); ve != nil {
		return ve
	}
	return fmt.Errorf("subflow: start %s: %w", workflowID, err)
}

// Describe returns the status of a run: the workflow's status query, with workflows.Progress filled
// from the heartbeat details of its pending Drive or RunSDKChild activity, when there is
// one. Heartbeat details are decoded with the default data converter. runID may be empty
// (the latest run).
func Describe(ctx context.Context, c tclient.Client, workflowID, runID string) (workflows.Status, error) {
	var st workflows.Status
	val, err := c.QueryWorkflow(ctx, workflowID, runID, workflows.QueryStatus)
	if err != nil {
		return workflows.Status{}, fmt.Errorf("subflow: query status of %s: %w", workflowID, err)
	}
	if err := val.Get(&st); err != nil {
		return workflows.Status{}, fmt.Errorf("subflow: decode status of %s: %w", workflowID, err)
	}
	if st.Phase != workflows.PhasePublishing && st.Phase != workflows.PhaseDriving {
		return st, nil
	}
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		return workflows.Status{}, fmt.Errorf("subflow: describe %s: %w", workflowID, err)
	}
	for _, pa := range desc.GetPendingActivities() {
		name := pa.GetActivityType().GetName()
		if (name != workflows.ActivityDrive && name != workflows.ActivityRunSDKChild) || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var p workflows.Progress
		if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p); err != nil {
			return workflows.Status{}, fmt.Errorf("subflow: decode progress of %s: %w", workflowID, err)
		}
		st.Progress = &p
	}
	return st, nil
}
