package subflow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/workflows"
)

// batchResultFetchers is how many results StreamBatchResults reads ahead.
const batchResultFetchers = 16

// BatchSummaryOf is a batch's summary: its result when it ended, else its progress
// (RunningBatchSummary), at once whatever the batch's state.
func BatchSummaryOf(ctx context.Context, c tclient.Client, id string) (workflows.BatchSummary, error) {
	var sum workflows.BatchSummary
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return sum, err
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return RunningBatchSummary(ctx, c, desc)
	}
	err = c.GetWorkflow(ctx, id, "").Get(ctx, &sum)
	return workflows.BatchOutcome(sum, err)
}

// BatchQueryTimeout bounds how long RunningBatchSummary waits for a batch's answer to its
// progress query. A query is answered by a worker of the build the batch's run is on: while
// none polls (its workers are stopped, or the run was moved to a build without workers), it
// would wait until one came.
const BatchQueryTimeout = 3 * time.Second

// RunningBatchSummary is the progress of the running batch desc describes: the answer to its
// progress query, or, when the run does not answer within BatchQueryTimeout, the counts it
// started with (its input), with Unanswered saying why and what its workflow task waits for.
// Those counts are as old as the run: its tasks done and running since are counted from its
// children in visibility (countBatchChildren), when visibility answers.
func RunningBatchSummary(ctx context.Context, c tclient.Client, desc *workflowservice.DescribeWorkflowExecutionResponse) (workflows.BatchSummary, error) {
	var sum workflows.BatchSummary
	exec := desc.GetWorkflowExecutionInfo().GetExecution()
	qctx, cancel := context.WithTimeout(ctx, BatchQueryTimeout)
	v, qerr := c.QueryWorkflow(qctx, exec.GetWorkflowId(), exec.GetRunId(), workflows.QueryProgress)
	cancel()
	if qerr == nil {
		return sum, v.Get(&sum)
	}
	if ctx.Err() != nil {
		return sum, qerr
	}
	var in workflows.BatchInput
	first, err := c.GetWorkflowHistory(ctx, exec.GetWorkflowId(), exec.GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT).Next()
	if err != nil {
		return sum, fmt.Errorf("batch %s did not answer its progress query (%v) and its input cannot be read: %w", exec.GetWorkflowId(), qerr, err)
	}
	started := first.GetWorkflowExecutionStartedEventAttributes()
	if started == nil {
		return sum, fmt.Errorf("batch %s did not answer its progress query (%v) and its history has no start", exec.GetWorkflowId(), qerr)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(started.GetInput(), &in); err != nil {
		return sum, fmt.Errorf("batch %s did not answer its progress query (%v) and its input does not decode: %w", exec.GetWorkflowId(), qerr, err)
	}
	sum = startedSummary(in)
	counts := "the counts are those of the run's start at %s"
	if closed, running, err := countBatchChildren(ctx, c, exec.GetWorkflowId()); err == nil {
		// Tasks that could not start have no child: the run's start counted them.
		if done := min(closed+len(sum.StartErrors), sum.Total); done >= sum.Done {
			sum.Done, sum.Running = done, running
			sum.Queued = max(sum.Total-sum.Done-sum.Running, 0)
			counts = "done, running and queued are counted from its children in visibility, the other counts are those of the run's start at %s"
		}
	}
	sum.Unanswered = fmt.Sprintf("the batch's run %s did not answer in %v (%v): %s; "+counts,
		exec.GetRunId(), BatchQueryTimeout, qerr, runWaits(desc), first.GetEventTime().AsTime().UTC().Format(time.RFC3339))
	return sum, nil
}

// countBatchChildren counts the StartSubagent runs that batch id started and visibility
// lists, closed and running. Visibility lags the runs by a moment: the
// counts may be that far behind.
func countBatchChildren(ctx context.Context, c tclient.Client, id string) (closed, running int, err error) {
	// The attribute is the run's own word; its parent, the server's: only the batch's
	// children count (childOf checks the same when the results are read).
	query := workflows.BatchRunsQuery(id) + fmt.Sprintf(" AND ParentWorkflowId = %q", id)
	count := func(q string) (int, error) {
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: q})
		if err != nil {
			return 0, fmt.Errorf("count runs of batch %s (%s): %w", id, q, err)
		}
		return int(resp.GetCount()), nil
	}
	all, err := count(query)
	if err != nil {
		return 0, 0, err
	}
	if running, err = count(query + " AND ExecutionStatus = 'Running'"); err != nil {
		return 0, 0, err
	}
	return max(all-running, 0), running, nil
}

// runWaits says what the run desc describes is waiting for, so that an unanswered query
// names its cause: a workflow task no worker of the run's build has taken yet, one a worker
// took and has not completed (a long task, or a worker that died with it), or none.
func runWaits(desc *workflowservice.DescribeWorkflowExecutionResponse) string {
	build := "its build"
	if vi := desc.GetWorkflowExecutionInfo().GetVersioningInfo(); vi.GetDeploymentVersion() != nil {
		build = "build " + vi.GetDeploymentVersion().GetDeploymentName() + ":" + vi.GetDeploymentVersion().GetBuildId()
		if vi.GetBehavior() == enumspb.VERSIONING_BEHAVIOR_PINNED {
			build += " (pinned)"
		}
	}
	at := func(ts *timestamppb.Timestamp) string { return ts.AsTime().UTC().Format(time.RFC3339) }
	pt := desc.GetPendingWorkflowTask()
	switch {
	case pt == nil:
		return "no workflow task is pending; the query waits for a worker of " + build
	case pt.GetState() == enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED:
		return fmt.Sprintf("its workflow task (attempt %d) has run since %s on a worker of %s", pt.GetAttempt(), at(pt.GetStartedTime()), build)
	default:
		return fmt.Sprintf("its workflow task has waited since %s for a worker of %s", at(pt.GetScheduledTime()), build)
	}
}

// startedSummary is the summary a batch run started with, from its input, as the run
// itself counts it (workflows.Batch).
func startedSummary(in workflows.BatchInput) workflows.BatchSummary {
	var sum workflows.BatchSummary
	running := 0
	if st := in.State; st != nil {
		sum = st.Summary
		running = len(st.Running)
		sum.Paused, sum.Concurrency = st.Paused, st.Concurrency
	} else {
		sum.Total = max(in.Total, len(in.Tasks))
	}
	sum.BatchID = cmp.Or(in.BatchID, sum.BatchID)
	if sum.Concurrency == 0 {
		sum.Concurrency = cmp.Or(in.Concurrency, workflows.DefaultBatchConcurrency)
	}
	sum.Runs++
	sum.Running = running
	sum.Queued = max(sum.Total-sum.Done-sum.Running, 0)
	return sum
}

// listedChild is a child of a batch as visibility lists it, or as its derived workflow id
// describes it.
type listedChild struct {
	index     int
	execution *commonpb.WorkflowExecution
	start     int64 // ms
	close     int64 // ms; 0 while running
	taskQueue string
}

// childOf reads a child of batch from its execution info: its task number is in its memo. ok
// is false for a run the batch did not start. The batch's search attribute and the memo are
// what any client may set on a run it starts; its parent is what only the batch's own
// workflow can be, so a run posing as a task's child cannot stand in for its result.
func childOf(info *workflowpb.WorkflowExecutionInfo, batch string) (ch listedChild, ok bool) {
	if info.GetParentExecution().GetWorkflowId() != batch {
		return ch, false
	}
	p := info.GetMemo().GetFields()[workflows.MemoBatchIndex]
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &ch.index) != nil {
		return ch, false
	}
	ch.execution, ch.taskQueue = info.GetExecution(), info.GetTaskQueue()
	ch.start = info.GetStartTime().AsTime().UnixMilli()
	if info.GetCloseTime() != nil && info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		ch.close = info.GetCloseTime().AsTime().UnixMilli()
	}
	return ch, true
}

// eachBatchChild calls each with every StartSubagent run of batch id that visibility lists
// (SubagentBatch = id) and the batch started (childOf), with its task number from the memo,
// a page of the list at a time.
func eachBatchChild(ctx context.Context, c tclient.Client, id string, each func(listedChild)) error {
	query := workflows.BatchRunsQuery(id)
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token, PageSize: workflows.BatchRunsPage})
		if err != nil {
			return fmt.Errorf("list runs of batch %s: %w", id, err)
		}
		for _, info := range resp.GetExecutions() {
			if ch, ok := childOf(info, id); ok {
				each(ch)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// closedChildren is what reading the results of a batch's closed children needs, indexed by
// task number. It holds one small entry per task, not what visibility lists, so that a batch
// of 100,000 tasks is read back in a few MB: a child's workflow id is derived from the batch
// id and its task number unless the task named its own, its run id is kept as 16 bytes, and
// the children's task queues share their strings.
type closedChildren struct {
	batch  string
	tasks  int           // the batch's count of tasks: task numbers run 0 … tasks-1
	byTask []closedChild // up to the highest task number listed
	queues map[string]string
	count  int
}

// closedChild is one closed child of closedChildren; closed is false for a task whose child
// is not known to have closed.
type closedChild struct {
	closed     bool
	run        uuid.UUID
	execution  *commonpb.WorkflowExecution // when the workflow id is not derived, or the run id not a UUID
	taskQueue  string
	durationMs int64
}

// newClosedChildren holds nothing until children are added: the batch's count of tasks comes
// from its input, which any client may have written, so it bounds the task numbers accepted
// but sizes nothing.
func newClosedChildren(batch string, tasks int) *closedChildren {
	return &closedChildren{batch: batch, tasks: tasks, queues: map[string]string{}}
}

func (cs *closedChildren) has(n int) bool {
	return n >= 0 && n < len(cs.byTask) && cs.byTask[n].closed
}

// add keeps ch when it closed and its task has no closed child yet. A task number outside
// the batch's (a memo any client could have written) is no task of the batch: ignored.
func (cs *closedChildren) add(ch listedChild) {
	if ch.close == 0 || ch.index < 0 || ch.index >= cs.tasks || cs.has(ch.index) {
		return
	}
	if ch.index >= len(cs.byTask) {
		cs.byTask = append(cs.byTask, make([]closedChild, ch.index+1-len(cs.byTask))...)
	}
	q, ok := cs.queues[ch.taskQueue]
	if !ok {
		q = ch.taskQueue
		cs.queues[q] = q
	}
	e := closedChild{closed: true, taskQueue: q, durationMs: max(ch.close-ch.start, 0)}
	run, err := uuid.Parse(ch.execution.GetRunId())
	if err == nil && ch.execution.GetWorkflowId() == workflows.BatchChildWorkflowID(cs.batch, ch.index) {
		e.run = run
	} else {
		e.execution = &commonpb.WorkflowExecution{WorkflowId: ch.execution.GetWorkflowId(), RunId: ch.execution.GetRunId()}
	}
	cs.byTask[ch.index] = e
	cs.count++
}

// execution is the workflow execution of task n's closed child.
func (cs *closedChildren) execution(n int) *commonpb.WorkflowExecution {
	e := cs.byTask[n]
	if e.execution != nil {
		return e.execution
	}
	return &commonpb.WorkflowExecution{WorkflowId: workflows.BatchChildWorkflowID(cs.batch, n), RunId: e.run.String()}
}

// describeRate bounds the describes a batch's results make per second for the runs
// visibility does not list yet. Each describe reads the namespace's search attributes, and a
// server that refreshes them on every read (system.forceSearchAttributesCacheRefreshOnRead,
// which the deployed shape once set) counts every one against its frontend's persistence
// rate limit: a burst of a few thousand exhausts it, and the visibility list that follows
// fails ("System Persistence Max QPS Reached") until the client's deadline.
const describeRate = 100

// describeChild finds the child of task n of batch id by its derived workflow id
// (workflows.BatchChildWorkflowID), without visibility. ok is false when no such run exists:
// the task never started, or it runs under a workflow id of its own.
func describeChild(ctx context.Context, c tclient.Client, id string, n int) (ch listedChild, ok bool, err error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflows.BatchChildWorkflowID(id, n), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return ch, false, nil
	}
	if err != nil {
		return ch, false, fmt.Errorf("describe task %d of batch %s: %w", n, id, err)
	}
	ch, ok = childOf(desc.GetWorkflowExecutionInfo(), id)
	return ch, ok && ch.index == n, nil
}

// BatchResultsOptions tunes BatchResults. The zero value reads what is there at once.
type BatchResultsOptions struct {
	// Wait is how long to wait for finished tasks whose runs neither visibility lists yet
	// nor their derived workflow id finds (tasks with ids of their own, on an eventually
	// consistent visibility store).
	Wait time.Duration
	// Missing, when set, is called each time the missing tasks change while waiting.
	Missing func(MissingResults)
	// Namespace is the client's namespace (default "default"), where the results are read
	// from the batch's own history. In another namespace than the client's, that history
	// is not found and each result is read from its child's run, more slowly.
	Namespace string
}

// MissingResults says which finished tasks of a batch have no result yet. Tasks lists their
// numbers when the batch ended with every task done; otherwise which tasks finished is not
// known task by task, and Count alone says how many results are short.
type MissingResults struct {
	BatchID string
	Count   int
	Tasks   []int
}

// Error implements error: BatchResults returns a *MissingResults when its Wait ran out.
func (m *MissingResults) Error() string {
	if len(m.Tasks) == 0 {
		return fmt.Sprintf("batch %s: %d finished tasks have no result yet: visibility does not list their runs", m.BatchID, m.Count)
	}
	shown := m.Tasks
	more := ""
	if len(shown) > 20 {
		shown, more = shown[:20], fmt.Sprintf(" and %d more", len(m.Tasks)-20)
	}
	nums := make([]string, len(shown))
	for i, n := range shown {
		nums[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("batch %s: %d finished tasks have no result yet (tasks %s%s): visibility does not list their runs",
		m.BatchID, m.Count, strings.Join(nums, ", "), more)
}

// BatchResults reads the result of every finished task of batch id, each once, ordered by
// task number; StreamBatchResults says how. It holds every result in memory: a large batch
// is better read with StreamBatchResults.
func BatchResults(ctx context.Context, c tclient.Client, id string, opts BatchResultsOptions) ([]workflows.BatchResult, error) {
	var results []workflows.BatchResult
	err := StreamBatchResults(ctx, c, id, opts, func(r workflows.BatchResult) error {
		results = append(results, r)
		return nil
	})
	return results, err
}

// StreamBatchResults passes the result of every finished task of batch id to emit, each
// once, in task order: one per child run that closed, plus the tasks that could not start
// (from the batch's summary). The batch's own count of finished tasks is the source of truth,
// not visibility, which may lag (Elasticsearch, Temporal Cloud): a finished task that the
// list misses is found by its derived workflow id, and when some are still missing it waits
// up to opts.Wait, then emits the results it has and returns a *MissingResults error. A
// result stored by reference is read back in full (ResolveOutcome). Results are read
// batchResultFetchers at once, ahead of emit, and none is kept after emit returns: what
// grows with the batch is a small entry per task (about 60 bytes) saying where its run is.
// An error from emit stops the reading and is returned.
func StreamBatchResults(ctx context.Context, c tclient.Client, id string, opts BatchResultsOptions, emit func(workflows.BatchResult) error) error {
	sum, err := BatchSummaryOf(ctx, c, id)
	if err != nil {
		return err
	}
	found := newClosedChildren(id, sum.Total)
	skip := map[int]bool{} // tasks that could not start, or whose derived id finds nothing
	for _, r := range sum.StartErrors {
		skip[r.Index] = true
	}
	deadline := time.Now().Add(opts.Wait)
	var short, told *MissingResults
	for {
		if err := eachBatchChild(ctx, c, id, found.add); err != nil {
			return err
		}
		missing := sum.Done - len(sum.StartErrors) - found.count
		// Finished tasks that visibility does not list yet: their runs are found by id, at
		// most describeRate a second.
		pace := time.NewTicker(time.Second / describeRate)
		for n := 0; n < sum.Total && missing > 0; n++ {
			if found.has(n) || skip[n] {
				continue
			}
			select {
			case <-ctx.Done():
				pace.Stop()
				return ctx.Err()
			case <-pace.C:
			}
			ch, ok, err := describeChild(ctx, c, id, n)
			if err != nil {
				return err
			}
			switch {
			case ok && ch.close != 0:
				found.add(ch)
				missing--
			case !ok:
				skip[n] = true
			}
		}
		pace.Stop()
		if missing <= 0 {
			break
		}
		m := &MissingResults{BatchID: id, Count: missing}
		if sum.Done == sum.Total {
			for n := range sum.Total {
				if !found.has(n) && !slices.ContainsFunc(sum.StartErrors, func(r workflows.BatchResult) bool { return r.Index == n }) {
					m.Tasks = append(m.Tasks, n)
				}
			}
		}
		if !time.Now().Before(deadline) {
			short = m
			break
		}
		if opts.Missing != nil && (told == nil || told.Count != m.Count) {
			opts.Missing(*m)
			told = m
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err := emitResults(ctx, c, opts.Namespace, found, sum.StartErrors, emit); err != nil {
		return err
	}
	if short != nil {
		return short
	}
	return nil
}

// emitResults reads the results of the closed children in task order, batchResultFetchers
// ahead of the one emitted, and passes them to emit interleaved with the tasks that could not
// start (startErrors), all in task order.
func emitResults(ctx context.Context, c tclient.Client, namespace string, children *closedChildren, startErrors []workflows.BatchResult,
	emit func(workflows.BatchResult) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type fetch struct {
		r    workflows.BatchResult
		err  error
		done chan struct{}
	}
	// The channel's capacity is the read-ahead: a fetch starts when it is queued.
	queue := make(chan *fetch, batchResultFetchers)
	history := newBatchHistory(c, cmp.Or(namespace, "default"), children.batch)
	go func() {
		defer close(queue)
		for n := range children.byTask {
			if !children.has(n) {
				continue
			}
			f := &fetch{done: make(chan struct{})}
			select {
			case queue <- f:
			case <-ctx.Done():
				return
			}
			ex := children.execution(n)
			held := history.take(ctx, n, ex)
			go func() {
				defer close(f.done)
				f.r, f.err = childResult(ctx, c, n, ex, children.byTask[n], held)
			}()
		}
	}()
	failed := slices.SortedFunc(slices.Values(startErrors), func(a, b workflows.BatchResult) int { return a.Index - b.Index })
	for f := range queue {
		<-f.done
		if f.err != nil {
			return f.err
		}
		for len(failed) > 0 && failed[0].Index < f.r.Index {
			if err := emit(failed[0]); err != nil {
				return err
			}
			failed = failed[1:]
		}
		if err := emit(f.r); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, r := range failed {
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}

// childResult reads the result of ex, the closed child ch of task n: from held, the batch's
// history, when it holds the result, else from the child's run.
func childResult(ctx context.Context, c tclient.Client, n int, ex *commonpb.WorkflowExecution, ch closedChild, held heldResult) (workflows.BatchResult, error) {
	var out workflows.Outcome
	var err error
	if held.result == nil || converter.GetDefaultDataConverter().FromPayloads(held.result, &out) != nil {
		held, out = heldResult{}, workflows.Outcome{}
		err = c.GetWorkflow(ctx, ex.GetWorkflowId(), ex.GetRunId()).Get(ctx, &out)
	}
	if ctx.Err() != nil {
		return workflows.BatchResult{}, ctx.Err()
	}
	res := workflows.ChildOutcome(out, err)
	if res.Error == "" {
		// A result over one payload (a cancelled child's partial answer too) is stored by
		// reference: read it back through the child's own task queue, whose workers reach
		// the store it was written to.
		if err := ResolveOutcome(ctx, c, ch.taskQueue, &res.Outcome); err != nil {
			return workflows.BatchResult{}, fmt.Errorf("subflow: result of task %d of %s: %w", n, ex.GetWorkflowId(), err)
		}
	}
	r := workflows.BatchResult{
		Index:      n,
		WorkflowID: ex.GetWorkflowId(),
		ChildID:    res.Outcome.ChildID,
		Error:      res.Error,
		DurationMs: ch.durationMs,
	}
	if r.Error == "" {
		r.Depth = res.Outcome.Depth
		r.StopReason = res.Outcome.Result.StopReason
		r.Output = session.JoinText(res.Outcome.Result.Output)
		r.Structured = res.Outcome.Result.Structured
		r.EndMessage = res.Outcome.EndMessage
		r.InputTokens, r.OutputTokens = res.Outcome.Usage.InputTokens, res.Outcome.Usage.OutputTokens
	}
	if held.result != nil {
		r.Label = held.label
		return r, nil
	}
	in, err := StartInputOf(ctx, c, ex.GetWorkflowId(), ex.GetRunId())
	if err != nil {
		return r, err
	}
	r.Label = in.Request.Label
	return r, nil
}

// StartInputOf reads a run's StartInput from the first event of its history.
func StartInputOf(ctx context.Context, c tclient.Client, workflowID, runID string) (workflows.StartInput, error) {
	var in workflows.StartInput
	ex := &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID}
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("history of %s: empty", ex.GetWorkflowId())
	}
	ev, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("history of %s: %w", ex.GetWorkflowId(), err)
	}
	payloads := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(payloads) == 0 {
		return in, fmt.Errorf("history of %s: no input", ex.GetWorkflowId())
	}
	if err := converter.GetDefaultDataConverter().FromPayload(payloads[0], &in); err != nil {
		return in, fmt.Errorf("input of %s: %w", ex.GetWorkflowId(), err)
	}
	return in, nil
}

// The first tasks of a batch travel inline in its input up to these bounds (SplitInline);
// the others go in pages by workflows.UpdateAddTasks, each under pageMaxBytes (SendTaskPages).
const (
	InlineMaxTasks = 500
	inlineMaxBytes = 512 << 10
	pageMaxBytes   = 1 << 20
)

// SplitInline returns the tasks that travel inline in a BatchInput (up to InlineMaxTasks
// and 512 KiB) and the rest, for SendTaskPages.
func SplitInline(tasks []workflows.Task) (inline, paged []workflows.Task) {
	n, size := 0, 0
	for n < len(tasks) && n < InlineMaxTasks {
		b, err := json.Marshal(tasks[n])
		if err != nil || size+len(b) > inlineMaxBytes {
			break
		}
		size += len(b)
		n++
	}
	return tasks[:n], tasks[n:]
}

// SendTaskPages hands tasks, numbered from first, to the batch in pages by Update (SendTaskPage).
func SendTaskPages(ctx context.Context, c tclient.Client, batchID string, first int, tasks []workflows.Task) error {
	s := NewTaskStream(func(yield func(workflows.Task, error) bool) {
		for _, t := range tasks {
			if !yield(t, nil) {
				return
			}
		}
	})
	defer s.Close()
	s.n = first
	for page, err := range s.Pages() {
		if err != nil {
			return err
		}
		if err := SendTaskPage(ctx, c, batchID, page); err != nil {
			return err
		}
	}
	return nil
}

// TaskStream cuts a stream of tasks into the first tasks of a batch, which travel inline in
// its BatchInput (Inline), and pages for workflows.UpdateAddTasks (Pages), reading the
// stream as it goes: it holds one page at a time, so a batch of any size is handed over in
// the memory of a page. Close it when done.
type TaskStream struct {
	next  func() (workflows.Task, error, bool)
	stop  func()
	carry *workflows.Task // read, but over the last cut's bounds
	n     int             // tasks cut so far
}

// NewTaskStream returns a TaskStream over tasks. An error from tasks ends the stream.
func NewTaskStream(tasks iter.Seq2[workflows.Task, error]) *TaskStream {
	next, stop := iter.Pull2(tasks)
	return &TaskStream{next: next, stop: stop}
}

// Close stops reading the stream.
func (s *TaskStream) Close() { s.stop() }

// Inline returns the first tasks, for BatchInput.Tasks: up to InlineMaxTasks and 512 KiB,
// as SplitInline cuts them.
func (s *TaskStream) Inline() ([]workflows.Task, error) {
	return s.cut(InlineMaxTasks, inlineMaxBytes, true)
}

// Pages yields the tasks after Inline's in TaskPages numbered from 0, each up to
// workflows.MaxPageTasks and 1 MiB; a page is no longer held once the next is asked for.
func (s *TaskStream) Pages() iter.Seq2[workflows.TaskPage, error] {
	return func(yield func(workflows.TaskPage, error) bool) {
		for page := 0; ; page++ {
			first := s.n
			tasks, err := s.cut(workflows.MaxPageTasks, pageMaxBytes, false)
			if err != nil {
				yield(workflows.TaskPage{}, err)
				return
			}
			if len(tasks) == 0 || !yield(workflows.TaskPage{Page: page, First: first, Tasks: tasks}, nil) {
				return
			}
		}
	}
}

// Count is the number of tasks cut so far.
func (s *TaskStream) Count() int { return s.n }

// cut reads the next tasks up to maxTasks and maxBytes of JSON; a task over maxBytes on its
// own goes alone, unless inline, where it waits for a page.
func (s *TaskStream) cut(maxTasks, maxBytes int, inline bool) ([]workflows.Task, error) {
	var tasks []workflows.Task
	size := 0
	for len(tasks) < maxTasks {
		var t workflows.Task
		if s.carry != nil {
			t, s.carry = *s.carry, nil
		} else {
			var err error
			var ok bool
			if t, err, ok = s.next(); !ok {
				break
			} else if err != nil {
				return nil, err
			}
		}
		b, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("encode task %d: %w", s.n+len(tasks), err)
		}
		if size+len(b) > maxBytes && (inline || len(tasks) > 0) {
			s.carry = &t
			break
		}
		size += len(b)
		tasks = append(tasks, t)
	}
	s.n += len(tasks)
	return tasks, nil
}

// SendTaskPage hands one page of tasks to the batch by Update. A page that fails is sent
// again (the batch acknowledges a page it already holds), a few times.
func SendTaskPage(ctx context.Context, c tclient.Client, batchID string, page workflows.TaskPage) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = UpdateBatch(ctx, c, batchID, workflows.UpdateAddTasks, nil, page); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return fmt.Errorf("hand tasks %d…%d to batch %s: %w", page.First, page.First+len(page.Tasks)-1, batchID, err)
}

// UpdateBatch sends update name to the batch and waits for its answer, decoded into sum
// when not nil.
func UpdateBatch(ctx context.Context, c tclient.Client, batchID, name string, sum *workflows.BatchSummary, args ...any) error {
	h, err := c.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID:   batchID,
		UpdateName:   name,
		Args:         args,
		WaitForStage: tclient.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return updateError(batchID, name, err)
	}
	var s workflows.BatchSummary
	if err := h.Get(ctx, &s); err != nil {
		return updateError(batchID, name, err)
	}
	if sum != nil {
		*sum = s
	}
	return nil
}

// updateError names the side to upgrade when the batch's worker refused update name as
// unknown: the starter is newer than the workers (docs/compatibility.md, "Mixed releases").
func updateError(batchID, name string, err error) error {
	if strings.Contains(err.Error(), "unknown update "+name+".") {
		return fmt.Errorf("subflow: update %q of batch %s is unknown to the worker running it: the starter is newer than the workers; upgrade the workers: %w",
			name, batchID, err)
	}
	return err
}
