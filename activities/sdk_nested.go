package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/sdkproc"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// sdkParentSession describes the sdk child whose subagent tool delegates, for sdkDelegate.
type sdkParentSession struct {
	cwd   string
	route session.Route
	depth int64
	// maxDepth is the depth cap of the sdk child's whole subtree (nil when none), sandbox
	// its delegated sandbox mode ("" when none): the stand-in passes both on.
	maxDepth *int64
	sandbox  string
}

// sdkDelegate runs one delegation an sdk child's subagent tool asked for, as a StartSubagent
// child workflow of the sdk run: the child runtime keeps its sessions to itself, so the
// nested run's parent is a stand-in session in our store with the runtime session's id and
// the sdk child's cwd, route, depth, subtree cap and sandbox (created if absent). The activity asks its own
// workflow to start the run (the sdk-delegate update, which completes once the child
// workflow started) and waits for the run's result by its deterministic workflow id.
//
// ctx is the request's context (the process connection's); actx the activity's. When the
// activity is cancelled the workflow's cancel reaches the nested run through Temporal, and
// the call answers aborted.
func (a *Activities) sdkDelegate(actx, ctx context.Context, parent sdkParentSession, p sdkproc.Delegation) (subagent.Result, error) {
	info := activity.GetInfo(actx)
	log := a.logger(actx, p.ParentSessionID).With(zap.String("callId", p.CallID))
	if err := a.ensureStandIn(actx, p.ParentSessionID, parent); err != nil {
		return subagent.Result{}, err
	}
	req := p.Request
	req.Parent = subagent.ParentRef{SessionID: p.ParentSessionID, Cwd: parent.cwd}
	provider := p.Provider
	if provider == "" {
		provider = subagent.ProviderSpawn
	}
	d := workflows.Delegation{
		CallID:   p.CallID,
		ChildID:  subagenttool.NestedChildID(p.ParentSessionID, p.CallID),
		Provider: provider,
		Request:  req,
	}
	id := workflows.WorkflowID(d.ChildID)
	log = log.With(zap.String("nestedWorkflowId", id))
	c := a.client(actx)
	waitCtx, cancel := mergeDone(ctx, actx)
	defer cancel()
	handle, err := c.UpdateWorkflow(waitCtx, client.UpdateWorkflowOptions{
		WorkflowID:   info.WorkflowExecution.ID,
		RunID:        info.WorkflowExecution.RunID,
		UpdateName:   workflows.UpdateSDKDelegate,
		Args:         []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = handle.Get(waitCtx, nil)
	}
	if err != nil {
		if waitCtx.Err() != nil {
			return subagent.Result{StopReason: subagent.StopAborted}, nil
		}
		return subagent.Result{}, fmt.Errorf("subagent: start nested run %s: %w", id, err)
	}
	log.Info("nested run of the sdk child started")
	var out workflows.Outcome
	err = c.GetWorkflow(waitCtx, id, "").Get(waitCtx, &out)
	if err != nil && waitCtx.Err() != nil {
		// The run was cancelled with the sdk run; its aborted outcome cannot reach the
		// child runtime any more, which is being disposed.
		return subagent.Result{StopReason: subagent.StopAborted}, nil
	}
	return a.nestedResult(waitCtx, id, out, err)
}

// ensureStandIn creates the stand-in parent session id in our store unless it exists.
func (a *Activities) ensureStandIn(ctx context.Context, id string, parent sdkParentSession) error {
	_, _, err := a.store.Load(ctx, id)
	if err == nil {
		return nil
	}
	if !errors.Is(err, session.ErrNotFound) {
		return fmt.Errorf("subagent: load the sdk child's session %s: %w", id, err)
	}
	if err := a.own(ctx, id); err != nil {
		return err
	}
	route := parent.route
	h := session.Header{ID: id, Cwd: parent.cwd, DelegationDepth: parent.depth, Route: &route, MaxDepth: parent.maxDepth}
	if err := a.store.Create(ctx, h); err != nil {
		return fmt.Errorf("subagent: create the sdk child's stand-in session %s: %w", id, err)
	}
	if parent.sandbox == "" {
		return nil
	}
	// The nested run's sandbox is its parent's delegated one (inprocess.DelegatedSandbox).
	ev, err := session.NewEvent(session.TypeSandboxMode,
		session.SandboxModeData{Mode: parent.sandbox, Source: inprocess.SourceDelegation})
	if err == nil {
		err = a.store.Append(ctx, id, ev)
	}
	if err == nil {
		err = a.store.Sync(ctx, id)
	}
	if err != nil && !errors.Is(err, session.ErrSeqConflict) {
		return fmt.Errorf("subagent: set the sandbox of the sdk child's stand-in session %s: %w", id, err)
	}
	return nil
}

// mergeDone returns a context that ends when either a or b does.
func mergeDone(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}
