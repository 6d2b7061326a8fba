package workflows

import (
	"errors"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/subagent"
)

// ActivityRecordNested is the name of the activity that stores the results of a drive's
// delegations as the tool results of their calls.
const ActivityRecordNested = "RecordNested"

// UpdateSDKDelegate is sent by RunSDKChild to its own workflow with a Delegation its sdk
// child's subagent tool asked for: the workflow starts it as a child workflow, and the update
// completes once the child started (or failed to). RunSDKChild then waits for the child's
// result by its workflow id, so the result enters this workflow's history once.
const UpdateSDKDelegate = "sdk-delegate"

// Delegation is one subagent tool call a Drive deferred to its workflow: the workflow runs
// it as a StartSubagent child workflow of ChildID's run.
type Delegation struct {
	// CallID is the id of the tool call in the calling child's session.
	CallID string `json:"callId"`
	// ChildID is the child id of the nested run; its workflow id is WorkflowID(ChildID). It
	// is a function of the calling session and CallID alone, so a drive that defers the
	// same call again names the same run.
	ChildID  string           `json:"childId"`
	Provider string           `json:"provider"`
	Request  subagent.Request `json:"request"`
}

// NestedCall names the nested run of one deferred call, for RecordNested.
type NestedCall struct {
	CallID     string `json:"callId"`
	WorkflowID string `json:"workflowId"`
}

// RecordNestedInput is the input of RecordNested: store the result of each closed nested run
// as the tool result of its call in the session ChildID, unless the call has one already.
// The activity reads the results from the runs themselves, so a result enters the calling
// workflow's history once (as its child's completion), never as an activity input.
type RecordNestedInput struct {
	ChildID string       `json:"childId"`
	Calls   []NestedCall `json:"calls"`
}

// drive runs the child's turn: Drive, and while a Drive returns deferred delegations, runs
// them as child workflows, records their results (RecordNested) and drives on from the
// store. It returns the summed DriveSummary. When the workflow is cancelled the children are
// cancelled with it (their future only resolves once they closed, with their aborted
// outcome), their results are still recorded, and drive returns the cancellation, so the
// caller reads the aborted result.
func (r *run) drive(ctx workflow.Context, childID string, req subagent.Request) (DriveSummary, error) {
	in := ChildInput{Provider: r.in.Provider, ChildID: childID, Request: req, RequestRef: r.requestRef}
	opts := driveOptions(r.activitySummary("drive"), 10, r.scheduleToClose())
	opts.TaskQueue = r.driveQueue(ctx)
	driveCtx := workflow.WithActivityOptions(ctx, opts)
	var total DriveSummary
	for {
		var sum DriveSummary
		err := workflow.ExecuteActivity(driveCtx, ActivityDrive, in).Get(ctx, &sum)
		delegations := sum.Delegations
		sum.Delegations = nil
		total.Steps, total.StreamedBytes, total.OutputTokens = sum.Steps, sum.StreamedBytes, sum.OutputTokens
		if err != nil || len(delegations) == 0 {
			return total, err
		}
		if ctx.Err() != nil {
			// Cancelled while the drive yielded: no nested run starts; the calls stay
			// unanswered in an aborted turn.
			return total, temporal.NewCanceledError()
		}
		r.status.Phase = PhaseDelegating
		r.status.Summary = &total
		r.runNested(ctx, delegations)
		r.status.Phase = PhaseDriving
		calls := make([]NestedCall, len(delegations))
		for i, d := range delegations {
			calls[i] = NestedCall{CallID: d.CallID, WorkflowID: WorkflowID(d.ChildID)}
		}
		// Disconnected: the partial answers of cancelled children are recorded too.
		recCtx, _ := workflow.NewDisconnectedContext(ctx)
		recCtx = workflow.WithActivityOptions(recCtx, shortOptions(r.activitySummary("record nested results of")))
		if err := workflow.ExecuteActivity(recCtx, ActivityRecordNested,
			RecordNestedInput{ChildID: childID, Calls: calls}).Get(recCtx, nil); err != nil {
			return total, err
		}
		if ctx.Err() != nil {
			return total, temporal.NewCanceledError()
		}
	}
}

// runNested starts every delegation as a child workflow at once and waits until all of them
// closed. How each ended is not needed here: RecordNested reads it.
func (r *run) runNested(ctx workflow.Context, delegations []Delegation) {
	futures := make([]workflow.ChildWorkflowFuture, len(delegations))
	for i, d := range delegations {
		in := StartInput{Provider: d.Provider, Request: d.Request, ChildID: d.ChildID}
		// A nested child's depth is its caller's plus one: set at start, its publication
		// has nothing left to upsert.
		opts := childOptions(in, AttrDepth.ValueSet(r.published.Depth+1))
		futures[i] = workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), WorkflowName, in)
	}
	for _, f := range futures {
		_ = f.Get(ctx, nil)
	}
}

// ChildOptions returns the options StartSubagent runs with as a child workflow: workflow id
// WorkflowID(in.ChildID) (which must be set), the parent's task queue, the run's
// StartMetadataOf (UI summary and details, start search attributes), and the cancellation
// semantics of a delegation: a cancel of the parent cancels the child, whose future resolves
// once the child closed with its aborted outcome; a parent that closes otherwise
// (terminated, timed out) has its children cancelled by the server.
func ChildOptions(in StartInput) workflow.ChildWorkflowOptions { return childOptions(in) }

// childOptions are ChildOptions with extra search attributes set at start (StartMetadataOf).
func childOptions(in StartInput, extra ...temporal.SearchAttributeUpdate) workflow.ChildWorkflowOptions {
	m := StartMetadataOf(in, extra...)
	return workflow.ChildWorkflowOptions{
		WorkflowID:            WorkflowID(in.ChildID),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WaitForCancellation:   true,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		StaticSummary:         m.Summary,
		StaticDetails:         m.Details,
		TypedSearchAttributes: m.SearchAttributes,
	}
}

// ExecuteSubagent runs one delegation from a workflow of your own, as a StartSubagent child
// workflow on the calling workflow's task queue, and returns its Outcome. It is the
// workflow-side counterpart of Start: in.Request names the parent session, or in.Root
// describes a root session to create; an empty in.ChildID is generated (deterministically,
// in a side effect).
//
// Errors: a request rejected by a rule returns a *subagent.ValidationError with the exact
// contract message. Cancelling ctx aborts the delegation (contract R-72): ExecuteSubagent waits for
// the child to close and returns its aborted Outcome, partial output included, with a
// *temporal.CanceledError. Other failures are returned as the child workflow's error.
func ExecuteSubagent(ctx workflow.Context, in StartInput) (Outcome, error) {
	if in.ChildID == "" {
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.NewString() }).Get(&in.ChildID); err != nil {
			return Outcome{}, err
		}
	}
	var out Outcome
	err := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, ChildOptions(in)), WorkflowName, in).Get(ctx, &out)
	out, err = RunOutcome(out, err)
	if _, detailed := CanceledOutcome(err); temporal.IsCanceledError(err) && !detailed {
		out.ChildID = in.ChildID // the child reported no outcome (cancelled before publication)
	}
	return out, err
}

// sdkNested are the child workflows an sdk run's delegations started.
type sdkNested struct {
	futures map[string]workflow.ChildWorkflowFuture // by workflow id
}

// handleSDKDelegations registers the sdk-delegate update handler of an sdk run. A delegation
// whose child already started (a retried request) is not started again.
func (r *run) handleSDKDelegations(ctx workflow.Context) (*sdkNested, error) {
	n := &sdkNested{futures: map[string]workflow.ChildWorkflowFuture{}}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSDKDelegate,
		func(hctx workflow.Context, d Delegation) error {
			id := WorkflowID(d.ChildID)
			f, ok := n.futures[id]
			if !ok {
				in := StartInput{Provider: d.Provider, Request: d.Request, ChildID: d.ChildID}
				f = workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, ChildOptions(in)), WorkflowName, in)
				n.futures[id] = f
			}
			return f.GetChildWorkflowExecution().Get(hctx, nil)
		},
		workflow.UpdateHandlerOptions{
			Description: "starts a delegation of the sdk child as a child workflow; completes once it started",
			Validator: func(d Delegation) error {
				if d.ChildID == "" {
					return errors.New("sdk-delegate: the delegation has no child id")
				}
				return nil
			},
		})
	return n, err
}

// wait waits until every child workflow closed: a cancelled sdk run's children end with it.
func (n *sdkNested) wait(ctx workflow.Context) {
	//workflowcheck:ignore waiting on every future issues no command; the order is irrelevant
	for _, f := range n.futures {
		_ = f.Get(ctx, nil)
	}
}
