package workflows

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// maxStartErrors bounds the unstartable tasks a batch keeps for `starter batch results`.
const maxStartErrors = 1000

// A run continues as new when its history passes these, whatever ContinueAsNewAfter says
// (large outputs make large child results), or when the server suggests it.
const (
	maxRunEvents = 20_000
	maxRunBytes  = 20 << 20
)

// AwaitChildTimeout bounds how long AwaitChild waits for one child that outlived the run
// that started it: a child may run for hours.
const AwaitChildTimeout = 30 * 24 * time.Hour

// Batch runs one StartSubagent child workflow per task, at most Concurrency at once (contract
// R-81), with nothing shared between the starter's host and the workers' but Temporal:
//
//   - Tasks come inline in the input and, for a large batch, in pages the starter hands over
//     with UpdateAddTasks. The update stores its page in the session store (SaveBatchPage),
//     where every worker reads it back when the batch reaches it (LoadBatchPage); the batch's
//     state keeps only the page numbers. The pages are removed when the batch ends.
//   - Results stay in Temporal: each child carries the batch id as its SubagentBatch search
//     attribute and its task number in its memo (MemoBatchIndex), so any machine reaching
//     the frontend lists a batch's runs and reads their results. The batch itself keeps
//     counts, a stop-reason histogram, token totals and a duration histogram (BatchSummary,
//     the answer to QueryProgress and to every update).
//   - Children are started with ParentClosePolicy ABANDON, so a run continues as new after
//     ContinueAsNewAfter starts waiting for them no longer than drainBound: it hands the
//     children still running to the next run by workflow id (BatchState.Running), and that
//     run awaits each with the AwaitChild activity, which long-polls the child's result
//     through the client. A child that runs for hours thus holds one concurrency slot and
//     stalls the others for no more than drainMax once a run.
//   - Live control: UpdatePause, UpdateResume, UpdateResize and UpdateCancel, each answered
//     with the new summary.
//
// Cancelling the workflow, or UpdateCancel, starts nothing more and cancels every running
// child; each ends aborted with its partial output (contract R-72) and is counted. A cancelled
// workflow ends Canceled with its BatchSummary as details; a batch cancelled by update
// completes with Cancelled set.
func Batch(ctx workflow.Context, in BatchInput) (BatchSummary, error) {
	if err := CheckBatchInput(in); err != nil {
		// Before anything starts: a bad input fails the batch at once, naming the field.
		return BatchSummary{}, ToApplicationError(err)
	}
	b := newBatch(ctx, in)
	if err := b.registerHandlers(ctx); err != nil {
		return BatchSummary{}, err
	}
	b.retainParents(ctx)
	// Awaiting children and aborting them go on after a cancel.
	bg, _ := workflow.NewDisconnectedContext(ctx)
	for _, rt := range b.inherited {
		b.awaitInherited(bg, rt)
	}

	b.show(ctx)
	b.startTasks(ctx)
	for b.exhausted && !b.cancelled && b.running > 0 && ctx.Err() == nil {
		// Every task has started: wait for the last children, or for a new build to hand
		// them to.
		_ = workflow.Await(ctx, func() bool { return b.running == 0 || b.cancelled || b.build.pending(ctx) })
		if b.build.move(ctx) {
			break
		}
	}

	if !b.cancelled && ctx.Err() == nil && (!b.exhausted || b.running > 0) {
		// Continue as new once every started child has its workflow and no update is half
		// done; children still running after the drain go on and the next run awaits them.
		b.drain(ctx)
		behavior := b.build.settle(ctx, bg, func() bool {
			return b.starting == 0 && !b.saving && workflow.AllHandlersFinished(bg)
		})
		if ctx.Err() == nil && !b.cancelled {
			return b.progress(), continueAsNew(ctx, behavior, BatchWorkflowName, b.next())
		}
	}
	if err := workflow.Await(ctx, func() bool { return b.running == 0 || b.cancelled }); err != nil || b.cancelled {
		b.cancelAll(bg)
		_ = workflow.Await(bg, func() bool { return b.running == 0 })
	}
	_ = workflow.Await(bg, func() bool { return !b.saving && workflow.AllHandlersFinished(bg) })
	if len(b.pages) > 0 {
		actx := workflow.WithActivityOptions(bg, shortOptions(fmt.Sprintf("remove pages of batch %s", b.id)))
		// Best effort: a page left behind is garbage, not a wrong result.
		_ = workflow.ExecuteActivity(actx, ActivityRemoveBatchPages, BatchPageInput{BatchID: b.id, Page: len(b.pages)}).Get(bg, nil)
	}
	sum := b.show(bg)
	if ctx.Err() != nil {
		return sum, temporal.NewCanceledError(sum)
	}
	return sum, nil
}

// batch is the state of one Batch run.
type batch struct {
	in        BatchInput
	id        string
	threshold int

	concurrency int
	paused      bool
	cancelled   bool

	// page holds tasks not yet started, the first one numbered cursor.
	page       []Task
	cursor     int
	pages      []PageRef
	stored     int
	saving     bool
	exhausted  bool
	startedNow int

	running  int
	starting int
	// children are the running children by task number; cancel is nil for a child
	// inherited from an earlier run (it is cancelled by workflow id).
	children  map[int]*batchChild
	inherited []RunningTask

	sum   BatchSummary
	build buildMove
}

type batchChild struct {
	rt     RunningTask
	cancel workflow.CancelFunc
}

func newBatch(ctx workflow.Context, in BatchInput) *batch {
	b := &batch{in: in, id: in.BatchID, concurrency: in.Concurrency, threshold: in.ContinueAsNewAfter,
		children: map[int]*batchChild{}}
	if b.id == "" {
		b.id = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	if b.concurrency <= 0 {
		b.concurrency = DefaultBatchConcurrency
	}
	if b.threshold <= 0 {
		b.threshold = DefaultContinueAsNewAfter
	}
	b.page = in.Tasks
	if st := in.State; st != nil {
		b.cursor, b.pages, b.stored = st.Next, st.Pages, st.Stored
		b.inherited = st.Running
		b.paused, b.sum = st.Paused, st.Summary
		b.build.Held = st.Summary.BuildHeld
		if st.Concurrency > 0 {
			b.concurrency = st.Concurrency
		}
	} else {
		b.stored = len(in.Tasks)
		b.sum.Total = max(in.Total, len(in.Tasks))
	}
	b.build.show = func(ctx workflow.Context) { b.show(ctx) } // the page carries the build line
	b.sum.BatchID = b.id
	b.sum.Priority = priorityOf(ctx) // read by each run: continue-as-new keeps the priority
	if b.sum.Started.IsZero() {
		b.sum.Started = workflow.Now(ctx)
	}
	b.sum.Runs++
	if b.sum.ByStopReason == nil {
		b.sum.ByStopReason = make(map[subagent.StopReason]int)
	}
	return b
}

func (b *batch) registerHandlers(ctx workflow.Context) error {
	err := workflow.SetQueryHandlerWithOptions(ctx, QueryProgress,
		func() (BatchSummary, error) { return b.progress(), nil },
		workflow.QueryHandlerOptions{Description: "queued, running and done tasks, stop reasons, tokens, durations"})
	if err != nil {
		return err
	}
	handlers := []struct {
		name, desc string
		handler    any
		validator  any
	}{
		{UpdateAddTasks, "store the next page of tasks", b.addTasks, b.validatePage},
		{UpdatePause, "start no more children", func(ctx workflow.Context) (BatchSummary, error) {
			b.paused = true
			return b.show(ctx), nil
		}, nil},
		{UpdateResume, "start children again", func(ctx workflow.Context) (BatchSummary, error) {
			b.paused = false
			return b.show(ctx), nil
		}, nil},
		{UpdateResize, "set the concurrency", func(ctx workflow.Context, n int) (BatchSummary, error) {
			b.concurrency = n
			return b.show(ctx), nil
		}, func(_ workflow.Context, n int) error {
			if n < 1 {
				return fmt.Errorf("batch %s: concurrency must be at least 1: %d", b.id, n)
			}
			return nil
		}},
		{UpdateCancel, "cancel the batch and its running children", func(ctx workflow.Context) (BatchSummary, error) {
			b.cancelled = true
			return b.show(ctx), nil
		}, nil},
	}
	for _, h := range handlers {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, h.name, h.handler,
			workflow.UpdateHandlerOptions{Validator: h.validator, Description: h.desc}); err != nil {
			return err
		}
	}
	return nil
}

// validatePage rejects a page that cannot belong to the batch, before it enters history.
func (b *batch) validatePage(_ workflow.Context, p TaskPage) error {
	switch {
	case p.Page < 0 || len(p.Tasks) == 0 || len(p.Tasks) > MaxPageTasks:
		return fmt.Errorf("batch %s: page %d must hold 1 to %d tasks: %d", b.id, p.Page, MaxPageTasks, len(p.Tasks))
	case p.First < 0 || p.First+len(p.Tasks) > b.sum.Total:
		return fmt.Errorf("batch %s: page %d (tasks %d…%d) lies beyond the batch's %d tasks",
			b.id, p.Page, p.First, p.First+len(p.Tasks)-1, b.sum.Total)
	case b.cancelled:
		return fmt.Errorf("batch %s: cancelled", b.id)
	}
	// Within the page, as CheckBatchInput within the inline tasks: the batch keeps no ids of
	// the pages it stored, so the starter checks the whole batch (starter batch does).
	if err := duplicateTaskID(p.Tasks, p.First); err != nil {
		return ToApplicationError(err)
	}
	return nil
}

// addTasks stores page p. Pages are taken in order, one at a time; a page stored already
// is acknowledged again.
func (b *batch) addTasks(ctx workflow.Context, p TaskPage) (BatchSummary, error) {
	if err := workflow.Await(ctx, func() bool { return !b.saving }); err != nil {
		return b.progress(), err
	}
	if p.Page < len(b.pages) {
		return b.progress(), nil
	}
	if p.Page != len(b.pages) || p.First != b.stored {
		return b.progress(), fmt.Errorf("batch %s: page %d starting at task %d is out of order: want page %d at task %d",
			b.id, p.Page, p.First, len(b.pages), b.stored)
	}
	b.saving = true
	defer func() { b.saving = false }()
	actx := workflow.WithActivityOptions(ctx, shortOptions(fmt.Sprintf("store page %d of batch %s", p.Page, b.id)))
	err := workflow.ExecuteActivity(actx, ActivitySaveBatchPage, BatchPageInput{BatchID: b.id, Page: p.Page, Tasks: p.Tasks}).Get(ctx, nil)
	if err != nil {
		return b.progress(), err
	}
	b.pages = append(b.pages, PageRef{Page: p.Page, First: p.First, Count: len(p.Tasks)})
	b.stored += len(p.Tasks)
	return b.progress(), nil
}

// retainParents makes the batch an owner of the parent sessions its inline tasks name, before
// any of them starts, so that the retention cleanup keeps them while the batch runs, however
// long its tasks wait (paused, queued behind the concurrency, or after continue-as-new)
// and however old the runs that wrote them. Tasks of stored pages are retained when the
// page is saved. A run whose tasks name no parent schedules nothing. A failure is logged
// and the batch goes on: its tasks still find their parents unless a cleanup removes them.
func (b *batch) retainParents(ctx workflow.Context) {
	parents := TaskParents(b.page)
	if len(parents) == 0 {
		return
	}
	actx := workflow.WithActivityOptions(ctx, shortOptions(fmt.Sprintf("retain the parent sessions of batch %s", b.id)))
	err := workflow.ExecuteActivity(actx, ActivityRetainTaskParents, RetainTaskParentsInput{BatchID: b.id, Sessions: parents}).Get(ctx, nil)
	if err != nil && ctx.Err() == nil {
		workflow.GetLogger(ctx).Warn("retain the parent sessions of the batch's tasks", "batch", b.id, "error", err)
	}
}

// startBurst is how many children a run asks the server to start before it sees them started.
// Without the bound a run fills every free slot in one workflow task: at a batch's start and
// after each continue-as-new, Concurrency children at once, whose starts the server works
// through ahead of the tasks of every other run on it, an interactive run's too. Bounded, a
// run's first children start a few at a time, each as fast as the server starts them; once
// the batch runs steadily it starts one as one ends, far below the bound.
const startBurst = 16

// startTasks starts children until every task started, the run should continue as new (its
// share of starts is done, its history is full, or a new build is current), or the batch is
// cancelled.
func (b *batch) startTasks(ctx workflow.Context) {
	for {
		if b.cancelled || ctx.Err() != nil {
			return
		}
		if b.cursor >= b.sum.Total {
			b.exhausted = true
			return
		}
		if b.startedNow >= b.threshold || b.historyFull(ctx) || b.build.move(ctx) {
			return
		}
		err := workflow.Await(ctx, func() bool {
			return b.cancelled || b.build.pending(ctx) ||
				(!b.paused && b.running < b.concurrency && b.starting < startBurst && (len(b.page) > 0 || b.stored > b.cursor))
		})
		if err != nil || b.cancelled {
			return
		}
		if b.build.pending(ctx) {
			continue // check the new build, and move to it when it is ready
		}
		if len(b.page) == 0 {
			if err := b.load(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				// The page is lost (its store is gone): its tasks cannot start.
				b.failTask(ctx, BatchResult{Index: b.cursor, Error: err.Error()})
				b.cursor++
				continue
			}
		}
		t, n := b.page[0], b.cursor
		b.page, b.cursor = b.page[1:], b.cursor+1
		b.startedNow++
		b.startChild(ctx, n, t)
	}
}

// load reads the stored page holding task cursor into page.
func (b *batch) load(ctx workflow.Context) error {
	for _, ref := range b.pages {
		if b.cursor < ref.First || b.cursor >= ref.First+ref.Count {
			continue
		}
		actx := workflow.WithActivityOptions(ctx, shortOptions(fmt.Sprintf("load page %d of batch %s", ref.Page, b.id)))
		var tasks []Task
		if err := workflow.ExecuteActivity(actx, ActivityLoadBatchPage, BatchPageInput{BatchID: b.id, Page: ref.Page}).Get(ctx, &tasks); err != nil {
			return fmt.Errorf("batch %s: load page %d: %w", b.id, ref.Page, err)
		}
		if off := b.cursor - ref.First; off < len(tasks) {
			b.page = tasks[off:]
			return nil
		}
		return fmt.Errorf("batch %s: page %d holds %d tasks, want %d", b.id, ref.Page, len(tasks), ref.Count)
	}
	return fmt.Errorf("batch %s: no stored page holds task %d", b.id, b.cursor)
}

// The drain bounds how long a run that is due to continue as new waits for the children it
// awaits to end. The server refuses a workflow task that closes a run while an event for the
// run arrived (UnhandledCommand), and the SDK then replays the run's whole history before it
// tries again: with children ending every few milliseconds a close failed twice in most runs,
// each failure a replay of megabytes. A run whose children have all ended has nothing left to
// arrive. Children still running after the bound, the long ones, are handed over as before.
const (
	// drainMin is the bound before any task has ended, and the least it is: tasks of 0.5 to
	// 1.3 s drained within it.
	drainMin = 2 * time.Second
	// drainMax caps the bound, so that a batch of long tasks stalls its slots for no more than
	// this once a run: a long child ends rarely, so its close seldom races, and it is handed
	// over.
	drainMax = 10 * time.Second
)

// drainBound returns how long this run's drain waits: a quarter more than the batch's 99th
// percentile task duration so far (the youngest child started as the drain began, and the
// histogram is within 1/16), between drainMin and drainMax. A fixed 2 s left half the
// children of a batch of 2 s tasks running, and their ends failed the close.
func (b *batch) drainBound() time.Duration {
	return min(max(b.sum.Durations.Percentile(99)*5/4, drainMin), drainMax)
}

// drain waits up to drainBound for the run's children to end, starting none.
// When they end first it cancels its timer, in the workflow task that closes the run: a timer
// left to fire while that task is out is an event like a child's completion, and fails it the
// same way (the server drops a fired timer's event only when the task cancels the timer). The
// SDK's AwaitWithTimeout leaves its timer running by default, which failed about one close in
// seventy.
func (b *batch) drain(ctx workflow.Context) {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimerWithOptions(tctx, b.drainBound(), workflow.TimerOptions{Summary: "drain: the run's children end before it continues as new"})
	_ = workflow.Await(ctx, func() bool { return b.running == 0 || b.cancelled || timer.IsReady() })
}

// historyFull reports whether this run's history is large enough to continue as new early.
func (b *batch) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistoryLength() > maxRunEvents || info.GetCurrentHistorySize() > maxRunBytes
}

// startChild starts task n as a child workflow that outlives this run, and counts it when
// it ends.
func (b *batch) startChild(ctx workflow.Context, n int, t Task) {
	begin := workflow.Now(ctx)
	in, err := t.StartInput(b.id, b.in.Defaults)
	if err != nil {
		b.failTask(ctx, BatchResult{Index: n, Label: t.Label, Error: err.Error()})
		return
	}
	in.ChildID = batchChildID(b.id, n)
	rt := RunningTask{Index: n, Label: t.Label, WorkflowID: t.ID, ChildID: in.ChildID, Started: begin}
	if rt.WorkflowID == "" {
		rt.WorkflowID = WorkflowID(in.ChildID)
	}
	cctx, cancel := workflow.WithCancel(ctx)
	m := StartMetadataOf(in)
	// A task the starter routed to its workspace's host queue (Task.TaskQueue) starts there,
	// any other on the batch's children's queue.
	cctx = workflow.WithChildOptions(cctx, workflow.ChildWorkflowOptions{
		WorkflowID:            rt.WorkflowID,
		TaskQueue:             cmp.Or(t.TaskQueue, b.in.TaskQueue),
		StaticSummary:         m.Summary,
		StaticDetails:         m.Details,
		TypedSearchAttributes: m.SearchAttributes,
		Memo:                  map[string]any{MemoBatchIndex: n},
		// The child outlives this run when the batch continues as new; the next run awaits
		// it by id. A cancelled batch cancels its children itself.
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WaitForCancellation: true,
	})
	b.running++
	b.starting++
	b.children[n] = &batchChild{rt: rt, cancel: cancel}
	b.show(ctx)
	fut := workflow.ExecuteChildWorkflow(cctx, WorkflowName, in)
	wait, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(wait, func(wait workflow.Context) {
		_ = fut.GetChildWorkflowExecution().Get(wait, nil)
		b.starting--
		var out Outcome
		err := fut.Get(wait, &out)
		b.finish(wait, rt, ChildOutcome(out, err))
	})
}

// ChildOutcome is the ChildResult of a child whose workflow returned out and err, read by
// RunOutcome: the outcome of a completed or Canceled child, else the error's message (a
// rejection's exact message).
func ChildOutcome(out Outcome, err error) ChildResult {
	out, err = RunOutcome(out, err)
	if err == nil || temporal.IsCanceledError(err) {
		return ChildResult{Outcome: out}
	}
	return ChildResult{Error: err.Error()}
}

// awaitInherited awaits a child an earlier run started, with AwaitChild.
func (b *batch) awaitInherited(ctx workflow.Context, rt RunningTask) {
	b.running++
	b.children[rt.Index] = &batchChild{rt: rt}
	workflow.Go(ctx, func(ctx workflow.Context) {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: AwaitChildTimeout,
			HeartbeatTimeout:    time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second},
			Summary:             fmt.Sprintf("await task %d of batch %s (%s)", rt.Index, b.id, rt.WorkflowID),
		})
		var res ChildResult
		if err := workflow.ExecuteActivity(actx, ActivityAwaitChild, AwaitChildInput{WorkflowID: rt.WorkflowID}).Get(ctx, &res); err != nil {
			res = ChildResult{Error: err.Error()}
		}
		b.finish(ctx, rt, res)
	})
}

// cancelAll cancels every running child: those of this run through their context, those
// inherited by workflow id. Their ends are counted as they come.
func (b *batch) cancelAll(ctx workflow.Context) {
	for _, n := range sortedKeys(b.children) {
		c := b.children[n]
		if c.cancel != nil {
			c.cancel()
			continue
		}
		_ = workflow.RequestCancelExternalWorkflow(ctx, c.rt.WorkflowID, "").Get(ctx, nil)
	}
}

// finish counts a child that ended.
func (b *batch) finish(ctx workflow.Context, rt RunningTask, res ChildResult) {
	delete(b.children, rt.Index)
	b.running--
	var stop subagent.StopReason
	if res.Error == "" {
		stop = res.Outcome.Result.StopReason
	}
	b.sum.countOutcome(stop, workflow.Now(ctx).Sub(rt.Started), res.Outcome.Usage)
	if stop != subagent.StopCompleted {
		b.sum.noteFailed(BatchResult{Index: rt.Index, Label: rt.Label, WorkflowID: rt.WorkflowID, StopReason: stop,
			Error: res.Error, EndMessage: res.Outcome.EndMessage})
	}
	b.show(ctx)
}

// failTask counts a task that could not start and keeps its error for the results.
func (b *batch) failTask(ctx workflow.Context, res BatchResult) {
	if len(b.sum.StartErrors) < maxStartErrors {
		b.sum.StartErrors = append(b.sum.StartErrors, res)
	}
	b.sum.countOutcome("", 0, session.Usage{})
	b.sum.noteFailed(BatchResult{Index: res.Index, Label: res.Label, Error: res.Error})
	b.show(ctx)
}

// show returns the batch's progress after showing it as the batch's Current Details (the
// batch page, BatchPage), which adds no event to the history: it is called on the workflow
// tasks the batch runs anyway, when a child starts or ends and when a control update lands.
func (b *batch) show(ctx workflow.Context) BatchSummary {
	s := b.progress()
	workflow.SetCurrentDetails(ctx, BatchPage(s, workflow.Now(ctx)))
	return s
}

// progress returns the summary with the live counts.
func (b *batch) progress() BatchSummary {
	s := b.sum
	s.Running = b.running
	s.Queued = max(s.Total-s.Done-s.Running, 0)
	s.Concurrency, s.Paused, s.Cancelled = b.concurrency, b.paused, b.cancelled
	s.BuildHeld = b.build.Held
	s.StartErrors = slices.Clone(b.sum.StartErrors)
	s.LastFailed = slices.Clone(b.sum.LastFailed)
	s.ByStopReason = make(map[subagent.StopReason]int, len(b.sum.ByStopReason))
	//workflowcheck:ignore a copy of a map; no command depends on the order
	for k, v := range b.sum.ByStopReason {
		s.ByStopReason[k] = v
	}
	return s
}

// next is the input of the run this one continues as: the unstarted tasks of the current
// page inline, the pages, the running children and the counters.
func (b *batch) next() BatchInput {
	next := b.in
	next.BatchID = b.id
	next.Tasks = b.page
	running := make([]RunningTask, 0, len(b.children))
	for _, n := range sortedKeys(b.children) {
		running = append(running, b.children[n].rt)
	}
	next.State = &BatchState{
		Next:        b.cursor,
		Pages:       b.pages,
		Stored:      b.stored,
		Running:     running,
		Paused:      b.paused,
		Concurrency: b.concurrency,
		Summary:     b.sum,
	}
	next.State.Summary.BuildHeld = b.build.Held
	return next
}

// sortedKeys returns the task numbers of children in order, so commands are deterministic.
func sortedKeys(children map[int]*batchChild) []int {
	return slices.Sorted(maps.Keys(children))
}

// batchChildID returns the child id of task n of batch: a name-based UUID, the same on
// every replay and in every run of the batch.
func batchChildID(batch string, n int) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("subflow:batch/"+batch+"/"+strconv.Itoa(n))).String()
}
