package workflows

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// Bounds of what one Batch run keeps in its history.
const (
	// batchPageSize is how many tasks one ReadBatchTasks call returns.
	batchPageSize = 200
	// flushMaxResults and flushMaxBytes bound one AppendBatchResults call.
	flushMaxResults = 200
	flushMaxBytes   = 512 << 10
	// A run continues as new when its history passes these, whatever ContinueAsNewAfter
	// says (large outputs make large child results), or when the server suggests it.
	maxRunEvents = 20_000
	maxRunBytes  = 20 << 20
)

// RuleInvalidBatch rejects a BatchInput that cannot run (a relative path).
const RuleInvalidBatch = "invalid-batch"

// Batch runs one StartSubagent child workflow per task, at most Concurrency at once (SPEC
// Every child carries the batch id as its SubagentBatch search attribute and, unless
// the task names one, the workflow id subagent-<childId>, its child id derived from the
// batch id and the task's number (so a replayed or continued batch starts the same ids).
//
// Results stay out of the batch's state: each finished task's BatchResult goes to OutFile
// through AppendBatchResults, in order of completion, while the batch keeps counts, a
// stop-reason histogram and a duration histogram (BatchSummary, also the answer to
// QueryProgress).
//
// After starting ContinueAsNewAfter children a run stops starting more, waits for its running
// children, writes their results and continues as new with the cursor and the counters. It
// waits rather than hand the children over because a child's ParentClosePolicy applies when
// its parent run closes, continue-as-new included, and a new run could not wait on the old
// run's children anyway; the cost is a short dip in concurrency every ContinueAsNewAfter
// tasks.
//
// Cancelling the batch starts nothing more and cancels every running child; each ends
// aborted with its partial output (SPEC R-72), and its result is written like any other. The
// batch then ends Canceled with its BatchSummary as details. A batch that cannot read its
// tasks or write its results fails, after its running children ended and their results were
// written where possible.
func Batch(ctx workflow.Context, in BatchInput) (BatchSummary, error) {
	b, err := newBatch(ctx, in)
	if err != nil {
		return BatchSummary{}, err
	}
	err = workflow.SetQueryHandlerWithOptions(ctx, QueryProgress,
		func() (BatchSummary, error) { return b.progress(), nil },
		workflow.QueryHandlerOptions{Description: "queued, running and done tasks, stop reasons, durations"})
	if err != nil {
		return BatchSummary{}, err
	}
	// The writer and the drain go on after a cancel: the aborted results must be written.
	bg, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(bg, b.writeResults)

	b.startTasks(ctx)

	_ = workflow.Await(bg, func() bool { return b.running == 0 })
	_ = workflow.Await(bg, func() bool { return b.writeErr != nil || (len(b.pending) == 0 && !b.writing) })
	sum := b.progress()
	switch {
	case b.writeErr != nil:
		return sum, fmt.Errorf("batch %s: write results to %s: %w", b.id, b.in.OutFile, b.writeErr)
	case b.readErr != nil:
		return sum, fmt.Errorf("batch %s: read tasks from %s: %w", b.id, b.in.TasksFile, b.readErr)
	case ctx.Err() != nil:
		return sum, temporal.NewCanceledError(sum)
	case !b.exhausted:
		return sum, workflow.NewContinueAsNewError(ctx, BatchWorkflowName, b.next())
	}
	return sum, nil
}

// batch is the state of one Batch run.
type batch struct {
	in          BatchInput
	id          string
	concurrency int
	threshold   int

	// page holds the tasks not yet started, the first one numbered cursor.
	page       []Task
	cursor     int
	fileOffset int64
	fileLine   int
	fileDone   bool
	exhausted  bool
	readErr    error
	startedNow int // children started by this run

	running int
	sum     BatchSummary

	pending   []BatchResult
	writing   bool
	outOffset int64
	writeErr  error
}

func newBatch(ctx workflow.Context, in BatchInput) (*batch, error) {
	for _, p := range []string{in.TasksFile, in.OutFile} {
		if p != "" && !filepath.IsAbs(p) {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("batch: files must be absolute paths: %q", p), RuleInvalidBatch, nil)
		}
	}
	b := &batch{in: in, id: in.BatchID, concurrency: in.Concurrency, threshold: in.ContinueAsNewAfter}
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
	b.fileDone = in.TasksFile == ""
	if st := in.State; st != nil {
		b.cursor, b.fileOffset, b.fileLine = st.Next, st.FileOffset, st.FileLine
		b.fileDone = b.fileDone || st.FileDone
		b.outOffset = st.OutOffset
		b.sum = st.Summary
	} else {
		b.sum.Total = in.Total
		if b.sum.Total == 0 && in.TasksFile == "" {
			b.sum.Total = len(in.Tasks)
		}
	}
	b.sum.BatchID, b.sum.OutFile = b.id, in.OutFile
	b.sum.Runs++
	if b.sum.ByStopReason == nil {
		b.sum.ByStopReason = make(map[subagent.StopReason]int)
	}
	return b, nil
}

// startTasks starts children until the tasks run out, the run should continue as new, the
// batch is cancelled, or tasks or results cannot be read or written.
func (b *batch) startTasks(ctx workflow.Context) {
	for {
		if ok := b.fill(ctx); !ok {
			return
		}
		if len(b.page) == 0 {
			b.exhausted = true
			return
		}
		if b.startedNow >= b.threshold || b.historyFull(ctx) {
			return
		}
		err := workflow.Await(ctx, func() bool { return b.running < b.concurrency || b.writeErr != nil })
		if err != nil || b.writeErr != nil {
			return
		}
		t, n := b.page[0], b.cursor
		b.page, b.cursor = b.page[1:], b.cursor+1
		b.running++
		b.startedNow++
		workflow.Go(ctx, func(ctx workflow.Context) { b.runTask(ctx, n, t) })
	}
}

// fill reads the next page of the tasks file when the page is empty and the file has more.
// It reports false when the batch must stop: cancelled, or the file unreadable.
func (b *batch) fill(ctx workflow.Context) bool {
	if len(b.page) > 0 || b.fileDone {
		return true
	}
	actx := workflow.WithActivityOptions(ctx, shortOptions(fmt.Sprintf("read tasks %d… of batch %s", b.cursor, b.id)))
	var out ReadBatchTasksOutput
	err := workflow.ExecuteActivity(actx, ActivityReadBatchTasks, ReadBatchTasksInput{
		Path: b.in.TasksFile, Offset: b.fileOffset, Line: b.fileLine, Limit: batchPageSize,
	}).Get(ctx, &out)
	if err != nil {
		if ctx.Err() == nil {
			b.readErr = err
		}
		return false
	}
	if b.fileOffset == 0 && b.sum.Total == 0 {
		b.sum.Total = b.cursor + out.Total
	}
	b.page, b.fileOffset, b.fileLine, b.fileDone = out.Tasks, out.Offset, out.Line, out.Done
	return true
}

// historyFull reports whether this run's history is large enough to continue as new early.
func (b *batch) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistoryLength() > maxRunEvents || info.GetCurrentHistorySize() > maxRunBytes
}

// runTask runs task n as a child workflow and records its result.
func (b *batch) runTask(ctx workflow.Context, n int, t Task) {
	begin := workflow.Now(ctx)
	res := BatchResult{Index: n, Label: t.Label}
	in, err := t.StartInput(b.id, b.in.Defaults)
	if err != nil {
		res.Error = err.Error()
		b.record(ctx, res, begin)
		return
	}
	in.ChildID = batchChildID(b.id, n)
	res.WorkflowID, res.ChildID = t.ID, in.ChildID
	if res.WorkflowID == "" {
		res.WorkflowID = WorkflowID(in.ChildID)
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            res.WorkflowID,
		TaskQueue:             b.in.TaskQueue,
		StaticSummary:         Summary(in),
		StaticDetails:         Details(in),
		TypedSearchAttributes: temporal.NewSearchAttributes(StartAttributes(in)...),
		// A terminated or timed-out batch still aborts its children rather than kill them.
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		// A cancelled batch waits for each child's abort, to keep its partial result.
		WaitForCancellation: true,
	})
	fut := workflow.ExecuteChildWorkflow(cctx, WorkflowName, in)
	var out Outcome
	wait, _ := workflow.NewDisconnectedContext(ctx)
	err = fut.Get(wait, &out)
	switch {
	case err == nil:
	case temporal.IsCanceledError(err):
		out = canceledOutcome(err, Outcome{ChildID: in.ChildID, Result: subagent.Result{StopReason: subagent.StopAborted}})
		if out.Result.StopReason == "" {
			out.Result.StopReason = subagent.StopAborted
		}
	default:
		res.Error = err.Error()
		if ve := Rejection(err); ve != nil {
			res.Error = ve.Message
		}
	}
	if res.Error == "" {
		res.Depth = out.Depth
		res.StopReason = out.Result.StopReason
		res.Output = session.JoinText(out.Result.Output)
		res.Structured = out.Result.Structured
		res.ResultRef = out.ResultRef
	}
	b.record(ctx, res, begin)
}

// record counts a finished task and queues its result for writing.
func (b *batch) record(ctx workflow.Context, res BatchResult, begin time.Time) {
	took := workflow.Now(ctx).Sub(begin)
	res.DurationMs = max(took.Milliseconds(), 0)
	b.running--
	b.sum.Done++
	if res.StopReason == "" {
		b.sum.Failed++
	} else {
		b.sum.ByStopReason[res.StopReason]++
	}
	b.sum.Durations.Add(took)
	if b.in.OutFile != "" {
		b.pending = append(b.pending, res)
	}
}

// writeResults appends the pending results to OutFile, one AppendBatchResults call at a
// time; results finishing meanwhile wait for the next call, so fast batches write in bulk.
func (b *batch) writeResults(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, func() bool { return len(b.pending) > 0 }); err != nil {
			return
		}
		n, size := 0, 0
		for n < len(b.pending) && n < flushMaxResults && (n == 0 || size < flushMaxBytes) {
			size += len(b.pending[n].Output) + len(b.pending[n].Structured)
			n++
		}
		b.writing = true
		actx := workflow.WithActivityOptions(ctx, shortOptions(fmt.Sprintf("write %d results of batch %s", n, b.id)))
		var offset int64
		err := workflow.ExecuteActivity(actx, ActivityAppendBatchResults, AppendBatchResultsInput{
			Path: b.in.OutFile, Offset: b.outOffset, Results: b.pending[:n],
		}).Get(ctx, &offset)
		b.writing = false
		if err != nil {
			b.writeErr = err
			return
		}
		b.outOffset = offset
		b.pending = append([]BatchResult(nil), b.pending[n:]...)
	}
}

// progress returns the summary with the live counts.
func (b *batch) progress() BatchSummary {
	s := b.sum
	s.Running = b.running
	if s.Total > 0 {
		s.Queued = max(s.Total-s.Done-s.Running, 0)
	}
	s.ByStopReason = make(map[subagent.StopReason]int, len(b.sum.ByStopReason))
	for k, v := range b.sum.ByStopReason {
		s.ByStopReason[k] = v
	}
	return s
}

// next is the input of the run this one continues as: the tasks not started and the
// counters. Unstarted tasks of the current page travel inline (at most one page).
func (b *batch) next() BatchInput {
	next := b.in
	next.BatchID = b.id
	next.Tasks = b.page
	next.State = &BatchState{
		Next:       b.cursor,
		FileOffset: b.fileOffset,
		FileLine:   b.fileLine,
		FileDone:   b.fileDone,
		OutOffset:  b.outOffset,
		Summary:    b.sum,
	}
	return next
}

// batchChildID returns the child id of task n of batch: a name-based UUID, the same on
// every replay and in every run of the batch.
func batchChildID(batch string, n int) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("subflow:batch/"+batch+"/"+strconv.Itoa(n))).String()
}
