package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// Publish creates and publishes the child in.ChildID (contract R-20): create-if-absent, so a
// retry with the same child id returns the stored child. Rejections are non-retryable
// ApplicationErrors whose Type is the rule and whose message is the exact contract message.
func (a *Activities) Publish(ctx context.Context, in workflows.ChildInput) (workflows.Published, error) {
	log := a.logger(ctx, in.ChildID)
	if err := a.resolveRequest(ctx, &in.Request, in.RequestRef); err != nil {
		return workflows.Published{}, err
	}
	// Nothing is written for a request refused for its parent or its child id: no owner
	// record of a parent that does not exist, none added to another run's child.
	parentID := in.Request.Parent.SessionID
	if _, _, err := a.store.Load(ctx, parentID); err != nil {
		if rej := parentRejection(parentID, err); rej != nil {
			log.Info("child rejected", zap.Error(err))
			return workflows.Published{}, rej
		}
		return workflows.Published{}, fmt.Errorf("activities: publish %s: read parent %s: %w", in.ChildID, parentID, err)
	}
	if err := a.checkOwner(ctx, runOwner(ctx, in.Owner), in.ChildID, in.ChildID, "its session"); err != nil {
		return workflows.Published{}, err
	}
	// The parent too: it is read while this run lives (docs/durability.md).
	if err := a.own(ctx, in.ChildID, parentID); err != nil {
		return workflows.Published{}, err
	}
	created, err := a.host.Create(ctx, inprocess.CreateRequest{
		Provider: in.Provider, ChildID: in.ChildID, Request: in.Request,
		RunTools: []string{subagenttool.Name}, Owner: runOwner(ctx, in.Owner),
	})
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, inprocess.ErrAbortedBeforePublication) {
			return workflows.Published{}, ctx.Err()
		}
		log.Info("child rejected", zap.Error(err))
		if rej := parentRejection(in.Request.Parent.SessionID, err); rej != nil {
			return workflows.Published{}, rej
		}
		return workflows.Published{}, rejection(err)
	}
	log.Info("child published", zap.Int64("depth", created.Depth), zap.String("model", created.Model))
	return workflows.Published{ChildID: created.ChildID, Depth: created.Depth, Model: created.Model}, nil
}

// Drive runs the child's one turn, resuming from the session store what an earlier attempt
// left unfinished (contract R-73), and heartbeats its Progress every interval. When the store
// leases sessions (session.Leaser), Drive holds the child's lease while it runs and appends
// through it, fenced; if another attempt takes the lease over, Drive stops the child and
// returns a retryable error (its result is not wanted: the server already retried it).
//
// A context cancelled by the workflow's cancel (its cause is a temporal.CanceledError) aborts
// the turn with cause parent; Drive returns once the turn/end is written, with the context's
// error. When the worker stops, Drive suspends the child instead — its turn stays unfinished
// and its log is synced — and returns a retryable TypeWorkerStopping error, so the retry
// resumes the turn elsewhere. A context that ends for any other cause (heartbeats that could
// not reach the server, an activity the server no longer knows) suspends the child the same
// way and returns a retryable error.
func (a *Activities) Drive(ctx context.Context, in workflows.ChildInput) (workflows.DriveSummary, error) {
	log := a.logger(ctx, in.ChildID)
	if err := a.resolveRequest(ctx, &in.Request, in.RequestRef); err != nil {
		return workflows.DriveSummary{}, err
	}
	a.resetStickiness(ctx, log)
	if activity.HasHeartbeatDetails(ctx) {
		// The store is the truth; the previous attempt's progress only says how far it got.
		var prev workflows.Progress
		if err := activity.GetHeartbeatDetails(ctx, &prev); err == nil {
			log.Info("resuming drive", zap.Int("previousSteps", prev.Steps))
		}
	}
	if err := a.checkCwd(ctx, in.ChildID); err != nil {
		return workflows.DriveSummary{}, err
	}
	var prog progress
	prog.set(workflows.Progress{Phase: phaseLeasing})
	stopHeartbeat := a.startHeartbeat(ctx, prog.get)
	defer stopHeartbeat()
	lease, err := a.lease(ctx, log, in.ChildID)
	switch {
	case err == nil:
		defer lease.end()
	case ctx.Err() != nil:
		return workflows.DriveSummary{}, ctx.Err()
	case isClosed(activity.GetWorkerStopChannel(ctx)):
		return workflows.DriveSummary{}, workerStopping("drive of child " + in.ChildID)
	default:
		return workflows.DriveSummary{}, fmt.Errorf("activities: drive %s: %w", in.ChildID, err)
	}

	var deferred delegations
	nested, err := a.subagentTool(&deferred)
	if err != nil {
		return workflows.DriveSummary{}, fmt.Errorf("activities: drive %s: %w", in.ChildID, err)
	}
	prog.set(workflows.Progress{Phase: inprocess.PhaseRunning})
	// The driver aborts the turn when its context ends, which only the workflow's cancel may
	// do: the SDK also cancels ctx when heartbeats cannot reach the server for a while (a
	// server restart, a network fault) or the activity is gone there, and such an attempt
	// must leave the turn unfinished for its retry.
	driveCtx, cancelDrive := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDrive()
	if a.admission != nil {
		// The agent makes its model requests in its own context: the admitted models find
		// this drive's progress by the child's session id.
		defer a.admission.DriveStarted(a.client(ctx), activity.GetInfo(ctx).TaskQueue, in.ChildID, prog.setWait)()
	}
	done := make(chan driveOutcome, 1)
	go func() {
		p, err := a.host.Drive(driveCtx, inprocess.DriveRequest{
			ChildID:    in.ChildID,
			Provider:   in.Provider,
			Request:    in.Request,
			OnProgress: func(p inprocess.Progress) { prog.set(p) },
			Tools:      []tools.Tool{nested},
			Store:      lease.store,
			Digest:     a.digest,
		})
		done <- driveOutcome{p, err}
	}()

	var res driveOutcome
	stopping, lost, fenced := false, false, false
	select {
	case res = <-done:
	case <-activity.GetWorkerStopChannel(ctx):
		stopping = true
		log.Info("worker stopping: suspending the child, its turn stays unfinished")
		res = a.suspend(ctx, log, in.ChildID, done)
	case <-ctx.Done():
		if temporal.IsCanceledError(context.Cause(ctx)) {
			cancelDrive()
			res = <-done
			break
		}
		lost = true
		log.Warn("drive lost its activity: suspending the child, its turn stays unfinished",
			zap.NamedError("cause", context.Cause(ctx)))
		res = a.suspend(ctx, log, in.ChildID, done)
	case <-lease.lost:
		// Another worker's retry took the session over (this one was frozen or cut off past
		// the lease's expiry): the store refuses this drive's appends, so stop it here.
		fenced = true
		log.Warn("drive lost its session lease: stopping, the holder's retry continues the turn",
			zap.Error(lease.err()))
		res = a.suspend(ctx, log, in.ChildID, done)
	}
	prog.set(res.progress)
	sum := workflows.DriveSummary{
		Steps: res.progress.Steps, StreamedBytes: res.progress.StreamedBytes, OutputTokens: res.progress.OutputTokens,
	}
	switch {
	case stopping:
		return sum, workerStopping("drive of child " + in.ChildID)
	case lost:
		return sum, fmt.Errorf("activities: drive %s: suspended, the retry resumes it: %w", in.ChildID, context.Cause(ctx))
	case fenced:
		return sum, fmt.Errorf("activities: drive %s: stopped, another attempt holds the session: %w", in.ChildID, lease.err())
	case res.err != nil && driveCtx.Err() != nil:
		log.Info("drive cancelled: the child's turn ended aborted (cause parent)")
		return sum, ctx.Err()
	case res.err != nil:
		log.Error("drive failed", zap.Error(res.err))
		return sum, res.err
	}
	sum.Delegations = deferred.all()
	log.Info("drive finished", zap.Int("steps", sum.Steps), zap.Int64("outputTokens", sum.OutputTokens),
		zap.Int("delegations", len(sum.Delegations)))
	return sum, nil
}

// phaseLeasing is the Progress phase of a drive waiting for its session lease.
const phaseLeasing = "leasing"

// isClosed reports whether c is closed; a nil channel (no stop channel) never is.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// driveOutcome is what inprocess.Host.Drive returned.
type driveOutcome struct {
	progress inprocess.Progress
	err      error
}

// suspendPoll is how often suspend looks for the child while the drive is still opening it.
const suspendPoll = 10 * time.Millisecond

// suspend stops the child of a running drive without ending its turn and returns the
// drive's outcome. The drive may still be opening the child, so suspend waits for it to be
// live (or for the drive to end first).
func (a *Activities) suspend(ctx context.Context, log *zap.Logger, childID string, done <-chan driveOutcome) driveOutcome {
	t := time.NewTicker(suspendPoll)
	defer t.Stop()
	for {
		if child, ok := a.host.Agent(childID); ok {
			// Not bounded by ctx: the SDK cancels it when the stop timeout ends, and the
			// suspension must still complete, or the turn would end aborted.
			if err := child.Suspend(context.WithoutCancel(ctx)); err != nil {
				log.Error("suspend child", zap.Error(err))
			}
			return <-done
		}
		select {
		case res := <-done:
			return res
		case <-t.C:
		}
	}
}

// ReadResult reads the child's result from the session store (contract R-28). With Cancelled
// set, a turn the log leaves unended is recorded as ended aborted, cause parent, first.
func (a *Activities) ReadResult(ctx context.Context, in workflows.ReadResultInput) (workflows.Outcome, error) {
	log := a.logger(ctx, in.ChildID)
	if err := a.resolveRequest(ctx, &in.Request, in.RequestRef); err != nil {
		return workflows.Outcome{}, err
	}
	res, hd, events, err := a.host.ReadResultLog(ctx, inprocess.ReadRequest{
		ChildID: in.ChildID, Request: in.Request, Cancelled: in.Cancelled,
	})
	if err != nil {
		return workflows.Outcome{}, err
	}
	log.Info("result read", zap.String("stopReason", string(res.StopReason)))
	own := events[min(hd.SeedLength, int64(len(events))):]
	out := workflows.Outcome{
		ChildID: in.ChildID, Depth: hd.DelegationDepth, Result: res, Usage: session.UsageSince(events, hd.SeedLength),
		Digest: subagent.BuildDigest(own, res.StopReason, a.digestOptions(in.ChildID)),
	}
	if err := a.byReference(ctx, &out); err != nil {
		return workflows.Outcome{}, err
	}
	return out, nil
}

// digestOptions are the digest options of a child whose session (in our store, or in its
// sdk runtime) is sessionID: its subagent calls link to their nested runs.
func (a *Activities) digestOptions(sessionID string) subagent.DigestOptions {
	return subagent.DigestOptions{Level: a.digest, Nested: func(tool, callID string) string {
		if tool != subagenttool.Name {
			return ""
		}
		return workflows.WorkflowID(subagenttool.NestedChildID(sessionID, callID))
	}}
}

// TypeWorkspaceMissing is the type of the non-retryable error of a drive that landed on a
// host where its child's cwd does not exist.
const TypeWorkspaceMissing = "workspace-missing"

// TypeSessionMissing is the type of the non-retryable error of a drive whose child the
// worker's session store does not hold: workers of one queue with separate stores.
const TypeSessionMissing = "session-missing"

// checkCwd fails non-retryable, naming this host and the path, when the child's cwd is not a
// directory here: its tools must never run anywhere else.
func (a *Activities) checkCwd(ctx context.Context, childID string) error {
	hd, _, err := a.store.Load(ctx, childID)
	host, _ := os.Hostname()
	if errors.Is(err, session.ErrNotFound) {
		// Publish wrote the child before this drive was scheduled: a store without it is
		// another store, and every retry on this queue would find the same.
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"activities: drive %s: the session is not in the session store of host %s, though it was published: the workers of this task queue use separate session stores; every worker serving a queue (and the same workspace root) must share one store (docs/deployment.md)",
			childID, host), TypeSessionMissing, err)
	}
	if err != nil {
		return fmt.Errorf("activities: drive %s: %w", childID, err)
	}
	if st, err := os.Stat(hd.Cwd); err == nil && st.IsDir() {
		return a.checkRoot("drive "+childID, hd.Cwd)
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"activities: drive %s: cwd %s does not exist on host %s; run it where that directory is served",
		childID, hd.Cwd, host), TypeWorkspaceMissing, nil)
}
