package workflows

import (
	"errors"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/subagent"
)

// Publication and cancellation of StartSubagent, in one table. The published update
// (UpdatePublished) waits until the run is *settled* (settle, called at most once); the
// status query reports the phase. Every path below settles exactly once, and the run's
// return settles whatever is left (the safety net in StartSubagent).
//
//	phase (Status.Phase)   what moves it                       next                the update caller sees
//	---------------------  ----------------------------------  ------------------  ------------------------------------------
//	validating             CheckInput or checkRunID fails      failed (reject)     ApplicationError: Type = rule, exact message
//	                       checks pass, child id chosen        creating-root or
//	                                                           publishing          (still waiting)
//	creating-root          CreateRootSession fails (rule)      failed (reject)     ApplicationError: Type = rule, exact message
//	  (no parent session)  workflow cancelled                  cancelled (reject)  CanceledError "subagent run was cancelled
//	                                                                                 before it was published"; no child exists
//	                       root session created                publishing          (still waiting)
//	publishing             Publish / RunSDKChild fails before  failed (reject)     ApplicationError (a rule, or any other
//	                         publication                                             non-retryable error, unwrapped)
//	                       workflow cancelled                  cancelled (reject)  CanceledError, as above
//	                       Publish returns / SignalSDKPublished driving (publish)  Published {runId, childId, depth}
//	                       RunSDKChild returns unsignalled     reading (publish)   Published, then the outcome at once
//	driving                Drive / RunSDKChild returns         reading             (already answered)
//	                       workflow cancelled                  reading, Cancelled  (already answered)
//	                       Drive fails, not cancelled          failed (fail)       (already answered)
//	reading                ReadResult returns (disconnected    completed, or       (already answered); the run ends Completed,
//	                         context: runs even when           cancelled (finish)    or Canceled with the Outcome as details
//	                         cancelled)
//	any                    the run returns while unsettled     (run over)          ApplicationError Type "not-published"
//
// reject settles with the error and fails the run with the same error; publish settles with
// Published; fail and finish only end the run, after publication. A cancel that lands after
// the drive ended still ends the run Canceled, its details carrying the outcome as read.

// cancelledBeforePublish is the message the published update fails with when the workflow
// is cancelled before its child was published: no child exists.
const cancelledBeforePublish = "subagent run was cancelled before it was published"

// StartSubagent runs one delegation (contract R-70…R-75): validate without I/O, publish the
// child, drive its one turn, read its result.
//
// The published update (UpdatePublished) completes at publication with Published, or fails
// with the rejection: a non-retryable ApplicationError whose Type is the rule and whose
// message is the exact contract message (the run then fails with the same error), or a
// CanceledError when the run was cancelled before publication. The status query
// (QueryStatus) answers at any time.
//
// Cancelling the workflow aborts the child (contract R-72): the drive is cancelled, the result
// is read in a disconnected context, and the run ends Canceled with the Outcome as the
// CanceledError's details. A cancel that arrives after the drive ended still ends the run
// Canceled, its details then carrying the outcome as read (possibly completed). A run
// cancelled before publication ends Canceled without details and leaves no child behind.
//
// Its drives run on the run's task queue; registered with RegisterOptions.InteractiveLane,
// an interactive run's drive runs on the queue's interactive lane.
func StartSubagent(ctx workflow.Context, in StartInput) (Outcome, error) {
	return startSubagent(ctx, in, false)
}

func startSubagent(ctx workflow.Context, in StartInput, lane bool) (Outcome, error) {
	r := &run{
		in:   in,
		lane: lane,
		status: Status{
			Phase:    PhaseValidating,
			Provider: in.Provider,
			Label:    in.Request.Label,
			Parent:   in.Request.Parent.SessionID,
			Priority: priorityOf(ctx),
		},
	}
	if err := r.registerHandlers(ctx); err != nil {
		return Outcome{}, err
	}
	out, err := r.execute(ctx)
	if !r.settled {
		// Every path settles the publication; this is the safety net that keeps a caller
		// of the update from waiting on a run that is over.
		r.settle(Published{}, temporal.NewApplicationErrorWithCause(
			"subagent run ended before it was published", "not-published", err))
	}
	// Disconnected: a cancelled run must still let its update handlers reply.
	done, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(done, func() bool { return workflow.AllHandlersFinished(done) })
	return out, err
}

// run is the state of one StartSubagent execution, read by its handlers.
type run struct {
	in StartInput
	// lane is RegisterOptions.InteractiveLane of the worker that registered the workflow.
	lane      bool
	status    Status
	settled   bool
	published Published
	rejection error
	// requestRef names the stored request when it is too big to copy into every activity's
	// input; r.in.Request then lacks its big fields.
	requestRef *PayloadRef
}

func (r *run) registerHandlers(ctx workflow.Context) error {
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePublished,
		func(ctx workflow.Context) (Published, error) {
			// Disconnected: a cancel before publication must reach the caller as the
			// settled rejection, not as the handler's own cancellation.
			wait, _ := workflow.NewDisconnectedContext(ctx)
			if err := workflow.Await(wait, func() bool { return r.settled }); err != nil {
				return Published{}, err
			}
			return r.published, r.rejection
		},
		workflow.UpdateHandlerOptions{Description: "completes once the child is published: {runId, childId, depth}"})
	if err != nil {
		return err
	}
	return workflow.SetQueryHandlerWithOptions(ctx, QueryStatus,
		func() (Status, error) { return r.status, nil },
		workflow.QueryHandlerOptions{Description: "phase, child id, depth and the last known drive summary"})
}

func (r *run) execute(ctx workflow.Context) (Outcome, error) {
	in := r.in
	// Checked before the start attributes are upserted: a value over the server's limits
	// (a label, a model) would fail the upsert, and the run, unnamed.
	if err := CheckInput(in); err != nil {
		return r.reject(ctx, ToApplicationError(err))
	}
	if err := r.upsert(ctx, r.startUpserts(ctx)...); err != nil {
		return r.fail(err)
	}
	if err := checkRunID(ctx); err != nil {
		return r.reject(ctx, err)
	}
	childID, err := r.childID(ctx)
	if err != nil {
		return r.fail(err)
	}
	r.status.ChildID = childID
	if err := r.storeRequest(ctx, childID); err != nil {
		return r.fail(err)
	}
	if subagent.IsRemote(in.Provider) {
		return r.remote(ctx, childID)
	}
	return r.inProcess(ctx, childID)
}

// inProcess runs [CreateRootSession] → Publish → Drive → ReadResult.
func (r *run) inProcess(ctx workflow.Context, childID string) (Outcome, error) {
	req := r.in.Request
	if req.Parent.SessionID == "" {
		parent, err := r.createRoot(ctx)
		if err != nil {
			return r.reject(ctx, err)
		}
		req.Parent = parent
	}

	r.status.Phase = PhasePublishing
	// A local activity cancelled by the workflow's cancel resolves at once, without waiting
	// for the attempt: a Publish that created the child after all would leave it behind
	// unaborted. So it runs to its end, like an activity waiting for its cancellation, and a
	// cancel that came before it starts nothing.
	if ctx.Err() != nil {
		return r.reject(ctx, temporal.NewCanceledError())
	}
	pubCtx, _ := workflow.NewDisconnectedContext(ctx)
	var pub Published
	err := r.step(pubCtx, ActivityPublish, r.activitySummary("publish"),
		ChildInput{Provider: r.in.Provider, ChildID: childID, Request: req, RequestRef: r.requestRef, Owner: RunOwner(ctx)}, &pub)
	if err != nil {
		return r.reject(ctx, err)
	}
	if err := r.publish(ctx, childID, pub); err != nil {
		return r.fail(err)
	}

	r.status.Phase = PhaseDriving
	driveCtx, deadline := r.startDeadline(ctx)
	sum, err := r.drive(driveCtx, childID, req)
	deadline.stop()
	cancelled := ctx.Err() != nil || deadline.passed
	if err != nil && !cancelled {
		return r.fail(err)
	}
	if err == nil {
		r.status.Summary = &sum
	}

	// ReadResult is short and must run even when the workflow is cancelled: it records the
	// abort and reads the partial output.
	r.status.Phase = PhaseReading
	readCtx, _ := workflow.NewDisconnectedContext(ctx)
	var out Outcome
	err = r.step(readCtx, ActivityReadResult, r.activitySummary("read result of"),
		ReadResultInput{ChildID: childID, Request: req, Cancelled: cancelled, RequestRef: r.requestRef}, &out)
	if err != nil {
		return r.fail(err)
	}
	return r.finish(ctx, out)
}

// createRoot runs CreateRootSession with a new session id (contract R-82): RootSessionID of the
// child, which its starter set as SubagentParent.
func (r *run) createRoot(ctx workflow.Context) (subagent.ParentRef, error) {
	r.status.Phase = PhaseCreatingRoot
	id := RootSessionID(r.status.ChildID)
	var parent subagent.ParentRef
	err := r.step(ctx, ActivityCreateRootSession, "create root session for "+r.in.Provider+" child "+short(r.status.ChildID),
		CreateRootSessionInput{SessionID: id, ChildID: r.status.ChildID, Owner: RunOwner(ctx), Root: *r.in.Root, Provider: r.in.Provider, Request: &r.in.Request, RequestRef: r.requestRef}, &parent)
	if err != nil {
		return subagent.ParentRef{}, err
	}
	// Checked against the start attributes with the publication's, in the same workflow
	// task: at most one visibility write.
	r.status.Parent = parent.SessionID
	return parent, nil
}

// remote runs RunSDKChild, which publishes through SignalSDKPublished while it runs.
func (r *run) remote(ctx workflow.Context, childID string) (Outcome, error) {
	r.status.Phase = PhasePublishing
	req := r.in.Request
	// The child runtime keeps its own sessions: a root parent needs no session of
	// ours, only its working directory for the child; and an sdk child takes
	// its route from the request only.
	req.Parent.Cwd = r.in.Cwd()
	req.AgentOptions = r.in.Route()
	nested, err := r.handleSDKDelegations(ctx)
	if err != nil {
		return r.fail(err)
	}
	defer nested.wait(ctx)
	actx, deadline := r.startDeadline(ctx)
	opts := driveOptions(r.activitySummary("run"), 3, r.scheduleToClose())
	opts.TaskQueue = r.driveQueue(ctx)
	actx = workflow.WithActivityOptions(actx, opts)
	fut := workflow.ExecuteActivity(actx, ActivityRunSDKChild, SDKInput{
		Provider:   r.in.Provider,
		RunID:      childID,
		Request:    req,
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID,
		RequestRef: r.requestRef,
	})
	var failed error
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(fut, func(workflow.Future) { done = true })
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalSDKPublished), func(c workflow.ReceiveChannel, _ bool) {
		var pub Published
		c.ReceiveAsync(&pub)
		if r.settled || failed != nil {
			return // a retried attempt handshakes again
		}
		if err := r.publish(ctx, childID, pub); err != nil {
			failed = err
			return
		}
		r.status.Phase = PhaseDriving
	})
	for !done {
		sel.Select(ctx)
	}
	if failed != nil {
		return r.fail(failed)
	}

	var out Outcome
	err = fut.Get(ctx, &out)
	deadline.stop()
	cancelled := ctx.Err() != nil || deadline.passed
	switch {
	case err != nil && !r.settled:
		return r.reject(ctx, err)
	case err != nil && !cancelled:
		return r.fail(err)
	case err != nil:
		// The outcome the cancelled activity carried, else the aborted one (it never
		// answered the cancel, or the test environment dropped its answer).
		var ok bool
		if out, ok = CanceledOutcome(err); !ok {
			out = Outcome{
				ChildID: childID,
				Depth:   r.published.Depth,
				Result:  subagent.Result{StopReason: subagent.StopAborted},
			}
		}
	case !r.settled:
		// The child ran to the end without its signal reaching us.
		if err := r.publish(ctx, childID, Published{Depth: out.Depth}); err != nil {
			return r.fail(err)
		}
	}
	out.ChildID = childID
	return r.finish(ctx, out)
}

// publish records the publication, upserts the child's search attributes and completes the
// published update.
func (r *run) publish(ctx workflow.Context, childID string, pub Published) error {
	pub.RunID = workflow.GetInfo(ctx).WorkflowExecution.RunID
	pub.ChildID = childID
	r.status.ChildID = childID
	r.status.Depth = pub.Depth
	if err := r.upsert(ctx, r.publishedChanges(ctx, childID, pub)...); err != nil {
		return err
	}
	r.settle(pub, nil)
	return nil
}

// publishedChanges returns the search attribute updates of a publication that the run does
// not have yet: for a root run started by a current starter, none.
func (r *run) publishedChanges(ctx workflow.Context, childID string, pub Published) []temporal.SearchAttributeUpdate {
	have := workflow.GetTypedSearchAttributes(ctx)
	var attrs []temporal.SearchAttributeUpdate
	keyword := func(key temporal.SearchAttributeKeyKeyword, v string) {
		if got, _ := have.GetKeyword(key); v != "" && got != v {
			attrs = append(attrs, key.ValueSet(v))
		}
	}
	keyword(AttrParent, r.status.Parent)
	keyword(AttrChild, childID)
	if got, ok := have.GetInt64(AttrDepth); !ok || got != int64(pub.Depth) {
		attrs = append(attrs, AttrDepth.ValueSet(pub.Depth))
	}
	if model(r.in) == "" {
		keyword(AttrModel, pub.Model)
	}
	return attrs
}

// finish ends a published run with its outcome: Canceled with the outcome as details when
// the workflow was cancelled, completed otherwise.
func (r *run) finish(ctx workflow.Context, out Outcome) (Outcome, error) {
	r.showDigest(ctx, out.Digest)
	if out.Digest != nil {
		out.EndMessage = out.Digest.EndMessage
	}
	out.Digest = nil
	cancelled := ctx.Err() != nil
	stop := out.Result.StopReason
	if stop == "" && cancelled {
		stop = subagent.StopAborted
	}
	r.status.StopReason = stop
	// The outcome is final: record its stop reason even when the run was cancelled.
	upsertCtx, _ := workflow.NewDisconnectedContext(ctx)
	if err := r.upsert(upsertCtx, AttrStopReason.ValueSet(string(stop)),
		AttrInputTokens.ValueSet(out.Usage.InputTokens), AttrOutputTokens.ValueSet(out.Usage.OutputTokens)); err != nil {
		return r.fail(err)
	}
	if cancelled {
		r.status.Phase = PhaseCancelled
		return out, temporal.NewCanceledError(out)
	}
	r.status.Phase = PhaseCompleted
	return out, nil
}

// showDigest records the child's digest in the status and shows it as the run's Current
// Details, which add no event to the history.
func (r *run) showDigest(ctx workflow.Context, d *subagent.Digest) {
	if d == nil {
		return
	}
	r.status.Digest = d
	workflow.SetCurrentDetails(ctx, d.Markdown())
}

// reject ends a run that never published its child. A cancellation becomes a CanceledError;
// a rejection by a rule becomes a top-level non-retryable ApplicationError carrying the exact
// message; anything else fails the run as is. The update caller gets the same error.
func (r *run) reject(ctx workflow.Context, err error) (Outcome, error) {
	if ctx.Err() != nil && temporal.IsCanceledError(err) {
		r.settle(Published{}, temporal.NewCanceledErrorWithOptions(temporal.CanceledErrorOptions{Message: cancelledBeforePublish}))
		r.status.Phase = PhaseCancelled
		return Outcome{}, temporal.NewCanceledError()
	}
	if rejection, ok := asRejection(err); ok {
		err = rejection
	}
	r.settle(Published{}, err)
	return r.fail(err)
}

// fail ends a run with err.
func (r *run) fail(err error) (Outcome, error) {
	r.status.Phase = PhaseFailed
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		r.status.Error = appErr.Message()
	} else {
		r.status.Error = err.Error()
	}
	return Outcome{}, err
}

func (r *run) settle(pub Published, err error) {
	if r.settled {
		return
	}
	r.settled, r.published, r.rejection = true, pub, err
}

// childID returns StartInput.ChildID, or a UUID generated in a side effect.
func (r *run) childID(ctx workflow.Context) (string, error) {
	if r.in.ChildID != "" {
		return r.in.ChildID, nil
	}
	var id string
	err := workflow.SideEffect(ctx, newID).Get(&id)
	return id, err
}

func newID(workflow.Context) any { return uuid.NewString() }

// RootSessionID is the id of the root session a run creates for child childID: a function of the child id alone, so the starter knows it before the run starts.
func RootSessionID(childID string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("subflow:root/"+childID)).String()
}

// StartAttributes are the search attributes of a run known before anything runs, which every
// starter sets at start. The workflow upserts those its start did not set, first. They
// include the child (when ChildID is set) and, for a run that creates its root session, the
// root's id (RootSessionID) and depth 1.
func StartAttributes(in StartInput) []temporal.SearchAttributeUpdate {
	var attrs []temporal.SearchAttributeUpdate
	for _, a := range startAttrs(in) {
		attrs = append(attrs, a.update)
	}
	return attrs
}

// startAttr is one search attribute known before anything runs.
type startAttr struct {
	key    temporal.SearchAttributeKey
	update temporal.SearchAttributeUpdate
}

func startAttrs(in StartInput) []startAttr {
	var attrs []startAttr
	keyword := func(key temporal.SearchAttributeKeyKeyword, v string) {
		if v != "" {
			attrs = append(attrs, startAttr{key, key.ValueSet(v)})
		}
	}
	keyword(AttrProvider, in.Provider)
	keyword(AttrModel, model(in))
	keyword(AttrParent, in.Request.Parent.SessionID)
	keyword(AttrBatch, in.Batch)
	if in.Request.Label != "" {
		attrs = append(attrs, startAttr{AttrLabel, AttrLabel.ValueSet(LabelAttribute(in.Request.Label))})
	}
	if in.ChildID == "" {
		return attrs
	}
	keyword(AttrChild, in.ChildID)
	if in.Request.Parent.SessionID == "" && in.Root != nil && !subagent.IsRemote(in.Provider) {
		keyword(AttrParent, RootSessionID(in.ChildID))
		attrs = append(attrs, startAttr{AttrDepth, AttrDepth.ValueSet(1)})
	}
	return attrs
}

// startUpserts are the start attributes the run upserts first: those its start options did
// not set (Start, Batch and nested runs set them all, a run started by hand may set none),
// which is usually none.
func (r *run) startUpserts(ctx workflow.Context) []temporal.SearchAttributeUpdate {
	have := workflow.GetTypedSearchAttributes(ctx)
	var attrs []temporal.SearchAttributeUpdate
	for _, a := range startAttrs(r.in) {
		if !have.ContainsKey(a.key) {
			attrs = append(attrs, a.update)
		}
	}
	return attrs
}

// step runs one short step — CreateRootSession, Publish, StorePayload or ReadResult — as a
// local activity, in the workflow task that schedules it, and stores its result in out. Its
// summary is the step's line in the UI timeline (the local activity's marker carries it).
func (r *run) step(ctx workflow.Context, activity, summary string, in, out any) error {
	lctx := workflow.WithLocalActivityOptions(ctx, localOptions(summary))
	return workflow.ExecuteLocalActivity(lctx, activity, in).Get(ctx, out)
}

func (r *run) upsert(ctx workflow.Context, attrs ...temporal.SearchAttributeUpdate) error {
	if len(attrs) == 0 {
		return nil
	}
	return workflow.UpsertTypedSearchAttributes(ctx, attrs...)
}

// activitySummary is the UI line of an activity, e.g. "drive spawn child 1a2b3c4d".
func (r *run) activitySummary(verb string) string {
	return verb + " " + r.in.Provider + " child " + short(r.status.ChildID)
}

// RunOwner names the run a workflow's sessions belong to (session.Header.Owner): its workflow
// id and the first run id of its chain. A retried activity, a retried workflow task and a
// Temporal reset of the run keep both, so they find their own sessions; a new start under the
// same workflow id has a run chain of its own, and another workflow an id of its own.
func RunOwner(ctx workflow.Context) string {
	info := workflow.GetInfo(ctx)
	first := info.FirstRunID
	if first == "" { // a server that does not say: the run itself
		first = info.WorkflowExecution.RunID
	}
	return info.WorkflowExecution.ID + "/" + first
}

// short returns the first 8 characters of an id, enough to tell runs apart in a list.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// driveQueue is the task queue of the run's drive: its queue's interactive lane when the
// worker serves one and the run is interactive, else "" (the run's own queue, which is the
// lane for a run started there).
func (r *run) driveQueue(ctx workflow.Context) string {
	info := workflow.GetInfo(ctx)
	if !r.lane || !Interactive(info.Priority) || IsInteractiveQueue(info.TaskQueueName) {
		return ""
	}
	return InteractiveQueue(info.TaskQueueName)
}
