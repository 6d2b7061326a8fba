package workflows

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// childRunTime is how long a fake child runs, in the test environment's skipped time.
const childRunTime = time.Minute

// batchFakes stands in for the children and the batch activities: children that take
// childRunTime to answer their prompt (or end aborted with "partial" when cancelled), a page
// store in memory, and AwaitChild answering for the children an earlier run handed over.
type batchFakes struct {
	// runTime is how long each child runs; childRunTime when 0.
	runTime  time.Duration
	mu       sync.Mutex
	running  int
	peak     int
	children map[string]StartInput // by workflow id
	attrs    map[string]string     // SubagentBatch of each child, by workflow id
	pages    map[int][]Task
	removed  []BatchPageInput
	awaited  []string
	// retained is every RetainTaskParents input, with the children started before it.
	retained      []RetainTaskParentsInput
	retainedAfter []int
	// onAwait, when set, answers AwaitChild; it completes every child by default.
	onAwait func(context.Context, AwaitChildInput) (ChildResult, error)
}

func newBatchEnv(t *testing.T, f *batchFakes) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(waitLimit)
	env.RegisterWorkflowWithOptions(Batch, workflow.RegisterOptions{Name: BatchWorkflowName})
	env.RegisterWorkflowWithOptions(f.child, workflow.RegisterOptions{Name: WorkflowName})
	for name, fn := range map[string]any{
		ActivitySaveBatchPage:     f.savePage,
		ActivityLoadBatchPage:     f.loadPage,
		ActivityRemoveBatchPages:  f.removePages,
		ActivityAwaitChild:        f.awaitChild,
		ActivityRetainTaskParents: f.retain,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	return env
}

func (f *batchFakes) child(ctx workflow.Context, in StartInput) (Outcome, error) {
	info := workflow.GetInfo(ctx)
	batch, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(AttrBatch)
	f.mu.Lock()
	if f.children == nil {
		f.children, f.attrs = map[string]StartInput{}, map[string]string{}
	}
	f.children[info.WorkflowExecution.ID] = in
	f.attrs[info.WorkflowExecution.ID] = batch
	f.running++
	f.peak = max(f.peak, f.running)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running--
		f.mu.Unlock()
	}()

	if in.Request.Label == "reject" {
		return Outcome{}, temporal.NewNonRetryableApplicationError("subagent depth 1 exceeds maxDepth 0", subagent.RuleDepthExceeded, nil)
	}
	if err := workflow.Sleep(ctx, cmp.Or(f.runTime, childRunTime)); err != nil {
		out := Outcome{ChildID: in.ChildID, Depth: 1, Result: subagent.Result{
			Output: []session.Block{session.Text("partial")}, StopReason: subagent.StopAborted}}
		return out, temporal.NewCanceledError(out)
	}
	return Outcome{ChildID: in.ChildID, Depth: 1, Result: subagent.Result{
		Output: in.Request.Prompt, StopReason: subagent.StopCompleted},
		Usage: session.Usage{InputTokens: 10, OutputTokens: 2}}, nil
}

func (f *batchFakes) savePage(_ context.Context, in BatchPageInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pages == nil {
		f.pages = map[int][]Task{}
	}
	if _, ok := f.pages[in.Page]; !ok {
		f.pages[in.Page] = in.Tasks
	}
	return nil
}

func (f *batchFakes) retain(_ context.Context, in RetainTaskParentsInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retained = append(f.retained, in)
	f.retainedAfter = append(f.retainedAfter, len(f.children))
	return nil
}

func (f *batchFakes) loadPage(_ context.Context, in BatchPageInput) ([]Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tasks, ok := f.pages[in.Page]
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("page %d is not stored", in.Page), "batch-page", nil)
	}
	return tasks, nil
}

func (f *batchFakes) removePages(_ context.Context, in BatchPageInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, in)
	return nil
}

func (f *batchFakes) awaitChild(ctx context.Context, in AwaitChildInput) (ChildResult, error) {
	f.mu.Lock()
	f.awaited = append(f.awaited, in.WorkflowID)
	on := f.onAwait
	f.mu.Unlock()
	if on != nil {
		return on(ctx, in)
	}
	return ChildResult{Outcome: Outcome{Result: subagent.Result{StopReason: subagent.StopCompleted},
		Usage: session.Usage{InputTokens: 10, OutputTokens: 2}}}, nil
}

func (f *batchFakes) Awaited() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.awaited)
}

func batchTasks(n int) []Task {
	tasks := make([]Task, n)
	for i := range tasks {
		tasks[i] = Task{Task: fmt.Sprintf("task %d", i), Model: "script.json", ModelProvider: "scripted"}
	}
	return tasks
}

var batchDefaults = TaskDefaults{Dir: "/work", Route: session.Route{Provider: "deepseek-official", Model: "deepseek-v4-flash"}}

// query returns the batch's progress, as `starter batch status` reads it.
func query(t *testing.T, env *testsuite.TestWorkflowEnvironment) BatchSummary {
	t.Helper()
	v, err := env.QueryWorkflow(QueryProgress)
	require.NoError(t, err)
	var s BatchSummary
	require.NoError(t, v.Get(&s))
	return s
}

// update sends a batch update from the test environment's loop and returns where its answer
// lands.
func update(env *testsuite.TestWorkflowEnvironment, name string, args ...any) *batchAnswer {
	a := &batchAnswer{}
	env.UpdateWorkflow(name, name+fmt.Sprint(args...), &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { a.err, a.done = err, true },
		OnComplete: func(v any, err error) {
			if s, ok := v.(BatchSummary); ok {
				a.sum = s
			}
			a.err, a.done = err, true
		},
	}, args...)
	return a
}

// batchAnswer is what the caller of a batch update got.
type batchAnswer struct {
	done bool
	sum  BatchSummary
	err  error
}

// runChain runs the batch to its end as the server would, one test environment per run,
// following every continue-as-new, and returns the last summary and the inputs handed over.
func runChain(t *testing.T, f *batchFakes, in BatchInput, maxRuns int) (BatchSummary, []BatchInput) {
	t.Helper()
	var nexts []BatchInput
	for run := 1; ; run++ {
		require.LessOrEqual(t, run, maxRuns, "the batch should need at most %d runs", maxRuns)
		env := newBatchEnv(t, f)
		env.ExecuteWorkflow(Batch, in)
		require.True(t, env.IsWorkflowCompleted())
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			require.NoError(t, err)
			var sum BatchSummary
			require.NoError(t, env.GetWorkflowResult(&sum))
			return sum, nexts
		}
		assert.Equal(t, BatchWorkflowName, can.WorkflowType.Name)
		in = BatchInput{}
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
		nexts = append(nexts, in)
	}
}

// TestBatchRunsEveryTaskWithinConcurrency: every task runs as a StartSubagent child carrying
// the batch id (search attribute and input), at most Concurrency at once; the progress query adds up while the batch runs; a rejected child is counted
// failed; the tokens of the children are summed.
func TestBatchRunsEveryTaskWithinConcurrency(t *testing.T) {
	f := &batchFakes{}
	env := newBatchEnv(t, f)
	tasks := batchTasks(25)
	tasks[3].Label = "reject"
	tasks[7].ID = "my-own-id"

	var during []BatchSummary
	for _, at := range []time.Duration{childRunTime / 2, 3 * childRunTime / 2, 5 * childRunTime / 2} {
		env.RegisterDelayedCallback(func() { during = append(during, query(t, env)) }, at)
	}
	env.ExecuteWorkflow(Batch, BatchInput{BatchID: "b1", Tasks: tasks, Total: 25, Defaults: batchDefaults, Concurrency: 4})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var sum BatchSummary
	require.NoError(t, env.GetWorkflowResult(&sum))

	assert.Equal(t, 4, f.peak, "the batch runs Concurrency children at once, never more")
	assert.Equal(t, 25, sum.Total)
	assert.Equal(t, 25, sum.Done)
	assert.Equal(t, 1, sum.Failed)
	assert.Equal(t, map[subagent.StopReason]int{subagent.StopCompleted: 24}, sum.ByStopReason)
	assert.Equal(t, int64(240), sum.InputTokens)
	assert.Equal(t, int64(48), sum.OutputTokens)
	assert.Zero(t, sum.Running)
	assert.Zero(t, sum.Queued)
	assert.Equal(t, 1, sum.Runs)
	assert.InEpsilon(t, childRunTime, sum.Durations.Percentile(50), 1.0/16, "percentiles are within a sixteenth")
	assert.False(t, sum.Completed())

	require.Len(t, during, 3)
	for _, s := range during {
		assert.Equal(t, 25, s.Total)
		assert.LessOrEqual(t, s.Running, 4)
		assert.Equal(t, s.Total, s.Queued+s.Running+s.Done, "every task is queued, running or done: %+v", s)
	}
	assert.Less(t, during[0].Done, during[2].Done, "progress moves")

	require.Len(t, f.children, 25, "every task ran in its own child")
	for i := range 25 {
		id := WorkflowID(batchChildID("b1", i))
		if i == 7 {
			id = "my-own-id"
		}
		in, ok := f.children[id]
		require.True(t, ok, "task %d runs as %s", i, id)
		assert.Equal(t, batchChildID("b1", i), in.ChildID)
		assert.Equal(t, "b1", in.Batch)
		assert.Equal(t, "b1", f.attrs[id], "the child is searchable by its batch")
	}
	assert.Empty(t, f.removed, "a batch of inline tasks stored no page")
}

// TestBatchTakesPagesByUpdate: tasks beyond the inline ones come in pages by UpdateAddTasks;
// each is stored, loaded when the batch reaches it, and removed at the end. A page out of
// order, beyond the batch's tasks or with two tasks of one id is refused, and a page sent
// again is acknowledged.
func TestBatchTakesPagesByUpdate(t *testing.T) {
	f := &batchFakes{}
	env := newBatchEnv(t, f)
	tasks := batchTasks(7)
	var first, again, outOfOrder, beyond, second, dup *batchAnswer
	twins := batchTasks(2)
	twins[0].ID, twins[1].ID = "twin", "twin"
	env.RegisterDelayedCallback(func() {
		dup = update(env, UpdateAddTasks, TaskPage{Page: 0, First: 2, Tasks: twins})
		first = update(env, UpdateAddTasks, TaskPage{Page: 0, First: 2, Tasks: tasks[2:5]})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		again = update(env, UpdateAddTasks, TaskPage{Page: 0, First: 2, Tasks: tasks[2:5]})
		outOfOrder = update(env, UpdateAddTasks, TaskPage{Page: 2, First: 5, Tasks: tasks[5:]})
		beyond = update(env, UpdateAddTasks, TaskPage{Page: 1, First: 5, Tasks: batchTasks(3)})
		second = update(env, UpdateAddTasks, TaskPage{Page: 1, First: 5, Tasks: tasks[5:]})
	}, 2*time.Second)
	env.ExecuteWorkflow(Batch, BatchInput{BatchID: "b2", Tasks: tasks[:2], Total: 7, Defaults: batchDefaults, Concurrency: 3})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var sum BatchSummary
	require.NoError(t, env.GetWorkflowResult(&sum))

	for name, a := range map[string]*batchAnswer{"first": first, "again": again, "second": second} {
		require.True(t, a.done, name)
		assert.NoError(t, a.err, name)
	}
	require.True(t, outOfOrder.done)
	assert.EqualError(t, outOfOrder.err, "batch b2: page 2 starting at task 5 is out of order: want page 1 at task 5")
	require.True(t, beyond.done)
	assert.EqualError(t, beyond.err, "batch b2: page 1 (tasks 5…7) lies beyond the batch's 7 tasks")
	require.True(t, dup.done)
	assert.Equal(t, &subagent.ValidationError{Rule: RuleDuplicateTaskID,
		Message: `batch tasks 2 and 3 have the same id "twin": each task's id names its own run`}, Rejection(dup.err))

	assert.Equal(t, 7, sum.Done)
	assert.True(t, sum.Completed())
	require.Len(t, f.children, 7)
	for i := range 7 {
		in := f.children[WorkflowID(batchChildID("b2", i))]
		assert.Equal(t, fmt.Sprintf("task %d", i), session.JoinText(in.Request.Prompt), "task %d from its page", i)
	}
	assert.Equal(t, []BatchPageInput{{BatchID: "b2", Page: 2}}, f.removed, "both pages removed at the end")
}

// TestBatchContinuesAsNewHandingOverRunningChildren: after ContinueAsNewAfter starts a run
// continues as new without waiting for its children; the next run inherits the running ones
// by workflow id, awaits each with AwaitChild, and counts it once. No task starts twice and
// the chain ends with every task counted.
func TestBatchContinuesAsNewHandingOverRunningChildren(t *testing.T) {
	f := &batchFakes{}
	tasks := batchTasks(10)
	sum, nexts := runChain(t, f, BatchInput{BatchID: "b3", Tasks: tasks, Total: 10, Defaults: batchDefaults,
		Concurrency: 3, ContinueAsNewAfter: 5}, 3)

	// Run 1 starts tasks 0-2, and 3-4 once those ended; it hands 3 and 4 over. Run 2 awaits
	// them beside tasks 5-9.
	require.Len(t, nexts, 1)
	first := nexts[0].State
	require.NotNil(t, first)
	assert.Equal(t, 5, first.Next)
	assert.Len(t, nexts[0].Tasks, 5, "the unstarted tasks travel inline")
	assert.Equal(t, "task 5", nexts[0].Tasks[0].Task)
	assert.Equal(t, 3, first.Concurrency)
	require.Len(t, first.Running, 2, "the run hands its running children over instead of waiting for them")
	for i, rt := range first.Running {
		assert.Equal(t, i+3, rt.Index, "in task order")
		assert.Equal(t, WorkflowID(batchChildID("b3", rt.Index)), rt.WorkflowID)
		assert.Equal(t, batchChildID("b3", rt.Index), rt.ChildID)
	}
	assert.Equal(t, 3, first.Summary.Done)
	assert.Equal(t, "b3", nexts[0].BatchID)

	var handed []string
	for _, next := range nexts {
		for _, rt := range next.State.Running {
			handed = append(handed, rt.WorkflowID)
		}
	}
	assert.ElementsMatch(t, handed, f.Awaited(), "every inherited child is awaited, once")
	assert.Len(t, f.children, 10, "no task starts twice")
	assert.Equal(t, 10, sum.Done)
	assert.Equal(t, 2, sum.Runs)
	assert.True(t, sum.Completed())
	assert.Equal(t, int64(100), sum.InputTokens, "inherited children's tokens count too")
}

// TestBatchDrainsItsChildrenBeforeContinuingAsNew: a run due to continue as new starts nothing
// more and waits, up to drainMin before any task has ended, for its children to end, so that its close does not race
// their completions; children that end within the bound are counted by the run that started
// them and none is handed over. (Children longer than the bound are handed over:
// TestBatchContinuesAsNewHandingOverRunningChildren.)
func TestBatchDrainsItsChildrenBeforeContinuingAsNew(t *testing.T) {
	f := &batchFakes{runTime: drainMin / 4}
	sum, nexts := runChain(t, f, BatchInput{BatchID: "b-drain", Tasks: batchTasks(10), Total: 10, Defaults: batchDefaults,
		Concurrency: 3, ContinueAsNewAfter: 5}, 3)

	require.Len(t, nexts, 1)
	first := nexts[0].State
	require.NotNil(t, first)
	assert.Equal(t, 5, first.Next, "the run started no task past its threshold while it drained")
	assert.Empty(t, first.Running, "children that end within the drain are not handed over")
	assert.Equal(t, 5, first.Summary.Done, "the run counts every child it started")
	assert.Empty(t, f.Awaited(), "nothing is inherited, so nothing is awaited by id")
	assert.Len(t, f.children, 10, "no task starts twice")
	assert.Equal(t, 10, sum.Done)
	assert.True(t, sum.Completed())
}

// TestBatchDrainWaitsAsLongAsItsTasksTake: the drain's bound follows the batch's own task
// durations, so a run whose tasks take longer than drainMin still waits for the children it
// started last, which began as the drain did, instead of handing them over while they end.
func TestBatchDrainWaitsAsLongAsItsTasksTake(t *testing.T) {
	f := &batchFakes{runTime: drainMin * 3 / 2}
	sum, nexts := runChain(t, f, BatchInput{BatchID: "b-drain-long", Tasks: batchTasks(9), Total: 9, Defaults: batchDefaults,
		Concurrency: 3, ContinueAsNewAfter: 6}, 3)

	// Run 1 starts tasks 0-2; once they end (3 s each), 3-5, and then it is due.
	require.Len(t, nexts, 1)
	first := nexts[0].State
	require.NotNil(t, first)
	assert.Equal(t, 6, first.Next)
	assert.Empty(t, first.Running, "children as long as the batch's tasks end within the drain")
	assert.Equal(t, 6, first.Summary.Done, "the run counts every child it started")
	assert.Empty(t, f.Awaited())
	assert.Len(t, f.children, 9, "no task starts twice")
	assert.Equal(t, 9, sum.Done)
	assert.True(t, sum.Completed())
}

// TestBatchCancelReachesInheritedChildren: a run that inherited children cancels them by
// workflow id when the batch is cancelled, and counts each once AwaitChild sees it end.
func TestBatchCancelReachesInheritedChildren(t *testing.T) {
	aborted := make(chan struct{})
	f := &batchFakes{onAwait: func(ctx context.Context, in AwaitChildInput) (ChildResult, error) {
		select {
		case <-aborted:
		case <-ctx.Done():
			return ChildResult{}, ctx.Err()
		}
		return ChildResult{Outcome: Outcome{Result: subagent.Result{StopReason: subagent.StopAborted}}}, nil
	}}
	env := newBatchEnv(t, f)
	inherited := RunningTask{Index: 0, WorkflowID: "subagent-inherited", ChildID: "inherited", Started: env.Now()}
	var cancelled []string
	env.OnRequestCancelExternalWorkflow(mock.Anything, mock.Anything, "").Return(func(_, id, _ string) error {
		cancelled = append(cancelled, id)
		close(aborted)
		return nil
	})
	// Sent with the run's first task: the test environment skips no time while AwaitChild
	// runs.
	var answer *batchAnswer
	env.RegisterDelayedCallback(func() { answer = update(env, UpdateCancel) }, 0)
	env.ExecuteWorkflow(Batch, BatchInput{BatchID: "b4", Tasks: batchTasks(3)[1:], Total: 3, Defaults: batchDefaults,
		Concurrency: 2, State: &BatchState{Next: 1, Stored: 3, Running: []RunningTask{inherited}, Concurrency: 2,
			Summary: BatchSummary{Total: 3, Runs: 1}}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "a batch cancelled by update completes")
	var sum BatchSummary
	require.NoError(t, env.GetWorkflowResult(&sum))

	require.True(t, answer.done)
	require.NoError(t, answer.err)
	assert.True(t, answer.sum.Cancelled)
	assert.Equal(t, []string{"subagent-inherited"}, cancelled)
	assert.Equal(t, []string{"subagent-inherited"}, f.Awaited())
	assert.True(t, sum.Cancelled)
	assert.Equal(t, 2, sum.Runs)
	assert.Equal(t, 1, sum.Done, "the inherited child, counted once it ended")
	assert.Equal(t, 2, sum.Queued, "the tasks never started stay queued")
	assert.Equal(t, map[subagent.StopReason]int{subagent.StopAborted: 1}, sum.ByStopReason)
	assert.Empty(t, f.children, "a cancelled batch starts nothing")
}

// TestBatchPauseResumeResize: a paused batch starts nothing while its running children
// finish; resumed and resized it runs the new concurrency. A resize below 1 is refused before
// it enters history.
func TestBatchPauseResumeResize(t *testing.T) {
	f := &batchFakes{}
	env := newBatchEnv(t, f)
	var paused, resumed, resized, refused *batchAnswer
	var whilePaused BatchSummary
	env.RegisterDelayedCallback(func() { paused = update(env, UpdatePause) }, childRunTime/2)
	env.RegisterDelayedCallback(func() { whilePaused = query(t, env) }, 3*childRunTime)
	env.RegisterDelayedCallback(func() {
		refused = update(env, UpdateResize, 0)
		resized = update(env, UpdateResize, 4)
		f.mu.Lock()
		f.peak = 0
		f.mu.Unlock()
		resumed = update(env, UpdateResume)
	}, 3*childRunTime+time.Second)
	env.ExecuteWorkflow(Batch, BatchInput{BatchID: "b5", Tasks: batchTasks(10), Total: 10, Defaults: batchDefaults, Concurrency: 2})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var sum BatchSummary
	require.NoError(t, env.GetWorkflowResult(&sum))

	require.True(t, paused.done)
	assert.True(t, paused.sum.Paused)
	assert.True(t, whilePaused.Paused)
	assert.Equal(t, 2, whilePaused.Done, "the children running at the pause finished")
	assert.Zero(t, whilePaused.Running, "nothing started while paused")
	require.True(t, refused.done)
	assert.EqualError(t, refused.err, "batch b5: concurrency must be at least 1: 0")
	require.True(t, resized.done)
	assert.Equal(t, 4, resized.sum.Concurrency)
	require.True(t, resumed.done)
	assert.False(t, resumed.sum.Paused)
	assert.Equal(t, 4, f.peak, "the resized concurrency")
	assert.Equal(t, 10, sum.Done)
	assert.True(t, sum.Completed())
}

// TestBatchWorkflowCancel: cancelling the workflow cancels its running children, each ends
// aborted and is counted, nothing more starts, and the batch ends Canceled with its summary
// as details.
func TestBatchWorkflowCancel(t *testing.T) {
	f := &batchFakes{}
	env := newBatchEnv(t, f)
	env.RegisterDelayedCallback(env.CancelWorkflow, childRunTime/2)
	env.ExecuteWorkflow(Batch, BatchInput{BatchID: "b6", Tasks: batchTasks(6), Total: 6, Defaults: batchDefaults, Concurrency: 3})
	require.True(t, env.IsWorkflowCompleted())

	var canceled *temporal.CanceledError
	require.ErrorAs(t, env.GetWorkflowError(), &canceled)
	var sum BatchSummary
	require.NoError(t, canceled.Details(&sum))
	assert.Equal(t, 6, sum.Total)
	assert.Equal(t, 3, sum.Done)
	assert.Equal(t, 3, sum.Queued, "tasks not started stay queued")
	assert.Equal(t, map[subagent.StopReason]int{subagent.StopAborted: 3}, sum.ByStopReason)
	assert.Len(t, f.children, 3)
}

// TestBatchCountsALostPageAsFailedTasks: a page the store no longer holds fails its tasks,
// kept as start errors for `starter batch results`, and the batch goes on.
func TestBatchCountsALostPageAsFailedTasks(t *testing.T) {
	f := &batchFakes{}
	env := newBatchEnv(t, f)
	env.ExecuteWorkflow(Batch, BatchInput{BatchID: "b7", Tasks: batchTasks(1), Total: 3, Defaults: batchDefaults,
		State: &BatchState{Stored: 3, Pages: []PageRef{{Page: 0, First: 1, Count: 2}}, Summary: BatchSummary{Total: 3}}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var sum BatchSummary
	require.NoError(t, env.GetWorkflowResult(&sum))
	assert.Equal(t, 3, sum.Done)
	assert.Equal(t, 2, sum.Failed)
	require.Len(t, sum.StartErrors, 2)
	assert.Equal(t, 1, sum.StartErrors[0].Index)
	assert.Contains(t, sum.StartErrors[0].Error, "batch b7: load page 0: ")
	assert.Equal(t, []BatchPageInput{{BatchID: "b7", Page: 1}}, f.removed)
}

// TestBatchRetainsTaskParentsFirst: a batch whose inline tasks name parent sessions makes
// itself their owner (each parent once) before it starts any task, so a retention cleanup
// while the tasks wait keeps them; a batch whose tasks name none schedules nothing for it,
// as the recorded histories of such batches have it.
func TestBatchRetainsTaskParentsFirst(t *testing.T) {
	tasks := batchTasks(4)
	tasks[0].Parent, tasks[1].Parent, tasks[3].Parent = "session-a", "session-b", "session-a"
	tasks[0].Provider = subagent.ProviderFork
	f := &batchFakes{}
	sum, _ := runChain(t, f, BatchInput{BatchID: "b1", Tasks: tasks, Defaults: batchDefaults}, 1)
	assert.Equal(t, 4, sum.Done)
	assert.Equal(t, []RetainTaskParentsInput{{BatchID: "b1", Sessions: []string{"session-a", "session-b"}}}, f.retained)
	assert.Equal(t, []int{0}, f.retainedAfter, "retained before any task started")

	f = &batchFakes{}
	sum, _ = runChain(t, f, BatchInput{BatchID: "b2", Tasks: batchTasks(3), Defaults: batchDefaults}, 1)
	assert.Equal(t, 3, sum.Done)
	assert.Empty(t, f.retained)
}

// TestBatchCountsAChildThatEndsWhileTheRunChecksItsBuild: a run that checks the target
// build as it continues as new goes on while the check runs; a child that ends meanwhile is
// counted by this run and not handed over, so the next run does not count it again (the
// summary's stop reasons add up to its done tasks).
func TestBatchCountsAChildThatEndsWhileTheRunChecksItsBuild(t *testing.T) {
	f := &batchFakes{}
	env := newBatchEnv(t, f)
	env.RegisterActivityWithOptions(func(context.Context, TargetBuildInput) (TargetBuild, error) { return TargetBuild{}, nil },
		activity.RegisterOptions{Name: ActivityCheckTargetBuild})
	notReady := TargetBuild{Target: "subflow:b", Reason: "has no worker polling task queue q"}
	// The run's first check answers at once; the one it makes as it continues as new, 11
	// minutes later (past buildRecheck), takes two minutes, while the inherited child ends.
	env.OnActivity(ActivityCheckTargetBuild, mock.Anything, mock.Anything).Return(notReady, nil).Once()
	env.OnActivity(ActivityCheckTargetBuild, mock.Anything, mock.Anything).After(2*time.Minute).Return(notReady, nil).Once()
	env.OnActivity(ActivityAwaitChild, mock.Anything, mock.Anything).After(12*time.Minute).Return(ChildResult{Outcome: Outcome{
		Result: subagent.Result{StopReason: subagent.StopCompleted}}}, nil)
	// A page that takes 11 minutes to store holds the continue-as-new until then.
	env.OnActivity(ActivitySaveBatchPage, mock.Anything, mock.Anything).After(11 * time.Minute).Return(nil)
	var added, resumed *batchAnswer
	env.RegisterDelayedCallback(func() {
		added = update(env, UpdateAddTasks, TaskPage{Page: 0, First: 2, Tasks: batchTasks(4)[2:]})
	}, time.Second)
	env.RegisterDelayedCallback(func() { resumed = update(env, UpdateResume) }, 2*time.Second)

	inherited := RunningTask{Index: 0, WorkflowID: "subagent-inherited", ChildID: "inherited", Started: env.Now()}
	env.ExecuteWorkflow(Batch, BatchInput{BatchID: "b8", Tasks: batchTasks(4)[1:2], Total: 4, Defaults: batchDefaults,
		Concurrency: 2, ContinueAsNewAfter: 1, State: &BatchState{Next: 1, Stored: 2, Running: []RunningTask{inherited},
			Paused: true, Concurrency: 2, Summary: BatchSummary{Total: 4, Runs: 1, BuildHeld: "stays on build a"}}})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next BatchInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.True(t, added.done && resumed.done)
	require.NoError(t, added.err)

	sum := next.State.Summary
	assert.Equal(t, sum.Done, sum.ByStopReason[subagent.StopCompleted]+sum.Failed, "every counted task once: %+v", sum)
	assert.Equal(t, 2, sum.Done, "task 1, and task 0 that ended during the check")
	assert.Empty(t, next.State.Running, "a counted child is not handed over")
	assert.Contains(t, sum.BuildHeld, "subflow:b has no worker polling task queue q", "the check's answer travels")
}
