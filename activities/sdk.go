package activities

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/sdkproc"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// phaseStarting is the Progress phase of an sdk child before its handshake completed.
const phaseStarting = "starting"

// RunSDKChild runs one sdk child from spawn to dispose (contract R-52… ): it starts
// the child process with in.RunID as its run id, signals workflows.SignalSDKPublished to its
// own workflow once the handshake completed, heartbeats the run's progress and returns the
// Outcome. The child is always disposed (the shutdown ladder, then reaped) before
// RunSDKChild returns.
//
// Each attempt runs its own session in the child runtime (see sdkSessionID); the Outcome
// and the signal name the run by in.RunID whatever the attempt.
//
// A context cancelled by the workflow's cancel (its cause is a temporal.CanceledError)
// settles the run aborted with its partial output and returns
// temporal.NewCanceledError(outcome); a context that ends for another cause (heartbeats that
// could not reach the server) returns a retryable error instead. When the worker stops, the run is disposed the same
// way and a retryable TypeWorkerStopping error is returned: a process cannot move, so the
// retry starts a new child. Start failures caused by the request (the cwd rules) are
// non-retryable rejections; a child that fails its handshake (exits, stays silent, answers
// garbage) is a non-retryable TypeSDKStart error (sdkStartFailure).
func (a *Activities) RunSDKChild(ctx context.Context, in workflows.SDKInput) (workflows.Outcome, error) {
	log := a.logger(ctx, in.RunID)
	if a.sdk == nil {
		return workflows.Outcome{}, temporal.NewNonRetryableApplicationError(
			"activities: this worker has no sdk child command configured", RuleNoSDKProvider, nil)
	}
	req := in.Request
	if err := a.resolveRequest(ctx, &req, in.RequestRef); err != nil {
		return workflows.Outcome{}, err
	}
	a.resetStickiness(ctx, log)
	depth, policy, err := a.sdkParent(ctx, &req)
	if err != nil {
		return workflows.Outcome{}, err
	}
	if cwd, err := a.sdk.ChildCwd(req); err == nil {
		if err := a.checkRoot("sdk child "+in.RunID, cwd); err != nil {
			return workflows.Outcome{}, err
		}
	}
	stopCh := activity.GetWorkerStopChannel(ctx)
	// Cancelled by the workflow's cancel (through ctx) and by the worker stopping.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	go func() {
		select {
		case <-stopCh:
			cancelRun()
		case <-runCtx.Done():
		}
	}()

	var live atomic.Pointer[sdkproc.Run] // set once published; read by the heartbeats
	stopHeartbeat := a.startHeartbeat(ctx, func() workflows.Progress {
		if r := live.Load(); r != nil {
			return r.Progress()
		}
		return workflows.Progress{Phase: phaseStarting}
	})
	defer stopHeartbeat()

	route := session.Route{Provider: a.sdk.Config().Provider, Model: a.sdk.Config().Model}.Override(req.AgentOptions)
	parent := sdkParentSession{route: route, depth: depth, sandbox: policy.Sandbox}
	if policy.MaxDepth != nil {
		limit := depth + *policy.MaxDepth
		parent.maxDepth = &limit
	}
	policy.ID = sdkSessionID(in.RunID, activity.GetInfo(ctx).Attempt)
	policy.Logger = log // the child's lines carry the workflow, run and child ids too
	policy.Digest = a.digestOptions(policy.ID)
	policy.Delegate = func(callCtx context.Context, p sdkproc.Delegation) (subagent.Result, error) {
		parent := parent
		cwd, err := a.sdk.ChildCwd(req) // resolved once already: the child runs there
		if err != nil {
			return subagent.Result{}, err
		}
		parent.cwd = cwd
		return a.sdkDelegate(ctx, callCtx, parent, p)
	}
	if a.admission != nil {
		// The child's model requests wait for the same cluster-wide permits as a drive's.
		queue := a.admission.TaskQueue()
		if queue == "" {
			queue = activity.GetInfo(ctx).TaskQueue
		}
		if c := a.client(ctx); c != nil {
			policy.Admit = a.admission.Admit(c, queue, func(string) {})
			policy.AdmitProviders = a.admission.Limited()
		}
	}
	run, err := a.sdk.StartRun(runCtx, req, policy)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return workflows.Outcome{}, ctx.Err()
	case isClosed(stopCh):
		return workflows.Outcome{}, workerStopping("sdk child " + in.RunID)
	default:
		log.Info("sdk child did not start", zap.Error(err))
		return workflows.Outcome{}, sdkStartFailure(err)
	}
	live.Store(run)

	log.Info("sdk child published", zap.Int("pid", run.PID()), zap.Int64("depth", depth))
	pub := workflows.Published{ChildID: in.RunID, Depth: depth, Model: route.Model}
	if err := a.signal(ctx, in.WorkflowID, pub); err != nil {
		// The workflow publishes at the end when the signal never came.
		log.Warn("signal publication", zap.Error(err))
	}

	res, _ := run.Result(runCtx) // never fails: faults are stop reasons
	if err := run.Dispose(context.WithoutCancel(ctx)); err != nil {
		log.Error("dispose sdk child", zap.Error(err))
	}
	a.keepSDKTranscript(context.WithoutCancel(ctx), log, in.RunID, run)
	out := workflows.Outcome{ChildID: in.RunID, Depth: depth, Result: res, Usage: run.Usage(), Digest: run.Digest()}
	if err := a.byReference(context.WithoutCancel(ctx), &out); err != nil {
		return workflows.Outcome{}, err
	}
	switch {
	case ctx.Err() != nil && temporal.IsCanceledError(context.Cause(ctx)):
		log.Info("sdk child cancelled", zap.String("stopReason", string(res.StopReason)))
		return out, temporal.NewCanceledError(out)
	case isClosed(stopCh):
		return out, workerStopping("sdk child " + in.RunID)
	case ctx.Err() != nil:
		// Heartbeats could not reach the server, or the server no longer knows this
		// attempt: not the workflow's cancel, so the retry runs the child again.
		log.Warn("sdk child lost its activity", zap.NamedError("cause", context.Cause(ctx)))
		return out, fmt.Errorf("activities: sdk child %s: the retry starts it again: %w", in.RunID, context.Cause(ctx))
	}
	log.Info("sdk child finished", zap.String("stopReason", string(res.StopReason)))
	return out, nil
}

// sdkStartFailure returns the error of a child that did not start: a rejection of the
// request as rejection makes it; a retryable error when the process could not be spawned
// for want of a resource (sdkproc.SpawnError.Transient), which a later attempt may find;
// and otherwise a non-retryable TypeSDKStart error with the provider's message. A child that
// exited, stayed silent, answered garbage or no identity in its handshake would do the same
// on every attempt, each costing a handshake timeout and the kill ladder, so the run ends
// at the first.
func sdkStartFailure(err error) error {
	var spawnErr *sdkproc.SpawnError
	if errors.As(err, &spawnErr) && spawnErr.Transient() {
		return err
	}
	err = rejection(err)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() {
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), TypeSDKStart, nil)
}

// sdkParent resolves what the sdk child needs from its parent session: the cwd (if the
// request carries none), the parent's depth, and the policy that follows the child
// (RunOptions.Sandbox and MaxDepth: the parent's sandbox mode and the depth that remains
// under the parent's subtree cap). A request without a parent session is a root's child, at
// depth 1; a parent session the store does not hold is refused (RuleParentNotFound).
func (a *Activities) sdkParent(ctx context.Context, req *subagent.Request) (int64, sdkproc.RunOptions, error) {
	var policy sdkproc.RunOptions
	if req.Parent.SessionID == "" {
		return 1, policy, nil
	}
	hd, events, err := a.store.Load(ctx, req.Parent.SessionID)
	if rej := parentRejection(req.Parent.SessionID, err); rej != nil {
		// As for an in-process child: a parent that does not exist is refused, not read as
		// a root at depth 1.
		return 0, policy, rej
	}
	switch {
	case err != nil:
		return 0, policy, fmt.Errorf("activities: load parent %s: %w", req.Parent.SessionID, err)
	}
	if req.Parent.Cwd == "" {
		req.Parent.Cwd = hd.Cwd
	}
	maxDepth := inprocess.TighterDepth(req.MaxDepth, hd.MaxDepth)
	depth, err := subagent.ChildDepth(hd.DelegationDepth, nil, maxDepth)
	if err != nil {
		return 0, policy, rejection(err)
	}
	if maxDepth != nil {
		remaining := *maxDepth - depth
		policy.MaxDepth = &remaining
	}
	if policy.Sandbox, err = inprocess.DelegatedSandbox(events); err != nil {
		return 0, policy, rejection(fmt.Errorf("activities: parent %s: %w", req.Parent.SessionID, err))
	}
	return depth, policy, nil
}

// sdkSessionID is the child runtime's session id of one attempt of run runID: the run id
// itself for the first attempt, a fresh one for every retry. A retry must not reuse the
// session of an attempt whose worker died: that session ends inside the dead attempt's
// unfinished turn, and prompting it again would first resume that turn to its end and then
// answer the same prompt a second time, in a second turn.
func sdkSessionID(runID string, attempt int32) string {
	if attempt <= 1 {
		return runID
	}
	return fmt.Sprintf("%s-attempt-%d", runID, attempt)
}

// signalWorkflow sends the sdk-published signal to the activity's own workflow run.
func signalWorkflow(ctx context.Context, workflowID string, pub workflows.Published) error {
	info := activity.GetInfo(ctx)
	if workflowID == "" {
		workflowID = info.WorkflowExecution.ID
	}
	runID := "" // the current run of another workflow id
	if workflowID == info.WorkflowExecution.ID {
		runID = info.WorkflowExecution.RunID
	}
	c := activity.GetClient(ctx)
	if c == nil {
		return errors.New("activities: no Temporal client in the activity context")
	}
	if err := c.SignalWorkflow(ctx, workflowID, runID, workflows.SignalSDKPublished, pub); err != nil {
		return fmt.Errorf("activities: signal %s to %s: %w", workflows.SignalSDKPublished, workflowID, err)
	}
	return nil
}
