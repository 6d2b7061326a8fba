package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// batchFakes stands in for the children and the batch activities: a tasks "file" served by
// task number, a results "file" kept in memory, and children that take childRunTime to
// answer their prompt, or end aborted with "partial" when cancelled.
type batchFakes struct {
	mu        sync.Mutex
	file      []Task
	reads     []ReadBatchTasksInput
	results   []BatchResult
	size      int64
	running   int
	peak      int
	children  map[string]StartInput // by workflow id
	batchAttr map[string]string     // SubagentBatch of each child, by workflow id
}

func newBatchEnv(t *testing.T, f *batchFakes) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(waitLimit)
	env.RegisterWorkflowWithOptions(Batch, workflow.RegisterOptions{Name: BatchWorkflowName})
	env.RegisterWorkflowWithOptions(f.child, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivityWithOptions(f.readTasks, activity.RegisterOptions{Name: ActivityReadBatchTasks})
	env.RegisterActivityWithOptions(f.appendResults, activity.RegisterOptions{Name: ActivityAppendBatchResults})
	return env
}

func (f *batchFakes) child(ctx workflow.Context, in StartInput) (Outcome, error) {
	info := workflow.GetInfo(ctx)
	batch, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(AttrBatch)
	f.mu.Lock()
	if f.children == nil {
		f.children, f.batchAttr = map[string]StartInput{}, map[string]string{}
	}
	f.children[info.WorkflowExecution.ID] = in
	f.batchAttr[info.WorkflowExecution.ID] = batch
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
	if err := workflow.Sleep(ctx, childRunTime); err != nil {
		out := Outcome{ChildID: in.ChildID, Depth: 1, Result: subagent.Result{
			Output: []session.Block{session.Text("partial")}, StopReason: subagent.StopAborted}}
		return out, temporal.NewCanceledError(out)
	}
	out := Outcome{ChildID: in.ChildID, Depth: 1, Result: subagent.Result{
		Output: in.Request.Prompt, StopReason: subagent.StopCompleted}}
	if in.Request.HasOutputSchema() {
		out.Result.Structured = json.RawMessage(`{"ok":true}`)
	}
	return out, nil
}

// readTasks serves the fake file with task numbers as offsets.
func (f *batchFakes) readTasks(_ context.Context, in ReadBatchTasksInput) (ReadBatchTasksOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, in)
	end := min(int(in.Offset)+in.Limit, len(f.file))
	out := ReadBatchTasksOutput{Tasks: f.file[in.Offset:end], Offset: int64(end), Line: end, Done: end == len(f.file)}
	if in.Offset == 0 {
		out.Total = len(f.file)
	}
	return out, nil
}

func (f *batchFakes) appendResults(_ context.Context, in AppendBatchResultsInput) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.Offset != f.size {
		return 0, fmt.Errorf("append at %d to a file of %d bytes", in.Offset, f.size)
	}
	for _, r := range in.Results {
		line, err := json.Marshal(r)
		if err != nil {
			return 0, err
		}
		f.size += int64(len(line)) + 1
		f.results = append(f.results, r)
	}
	return f.size, nil
}

func (f *batchFakes) Results() []BatchResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]BatchResult(nil), f.results...)
}

func batchTasks(n int) []Task {
	tasks := make([]Task, n)
	for i := range tasks {
		tasks[i] = Task{Task: fmt.Sprintf("task %d", i), Model: "script.json", ModelProvider: "scripted"}
	}
	return tasks
}

var batchDefaults = TaskDefaults{Dir: "/work", Route: session.Route{Provider: "deepseek-official", Model: "deepseek-v4-flash"}}

// resultsByIndex checks that every task 0…n-1 has exactly one result and returns them.
func resultsByIndex(t *testing.T, results []BatchResult, n int) []BatchResult {
	t.Helper()
	require.Len(t, results, n)
	byIndex := make([]BatchResult, n)
	seen := map[int]bool{}
	for _, r := range results {
		require.False(t, seen[r.Index], "task %d has two results", r.Index)
		seen[r.Index] = true
		byIndex[r.Index] = r
	}
	return byIndex
}

// TestBatchRunsEveryTaskWithinConcurrency: every task runs as a StartSubagent child with the
// batch id, at most Concurrency at once; every result is written; the progress query adds up
// while the batch runs; a rejected child is counted failed with the exact message.
func TestBatchRunsEveryTaskWithinConcurrency(t *testing.T) {
	f := &batchFakes{}
	env := newBatchEnv(t, f)
	tasks := batchTasks(25)
	tasks[3].Label = "reject"
	tasks[5].Schema = json.RawMessage(`{"type": "object"}`)
	tasks[7].ID = "my-own-id"

	var during []BatchSummary
	for _, at := range []time.Duration{childRunTime / 2, 3 * childRunTime / 2, 5 * childRunTime / 2} {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(QueryProgress)
			require.NoError(t, err)
			var s BatchSummary
			require.NoError(t, v.Get(&s))
			during = append(during, s)
		}, at)
	}
	env.ExecuteWorkflow(Batch, BatchInput{BatchID: "b1", Tasks: tasks, Defaults: batchDefaults, Concurrency: 4, OutFile: "/out.jsonl"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var sum BatchSummary
	require.NoError(t, env.GetWorkflowResult(&sum))

	assert.Equal(t, 4, f.peak, "the batch runs Concurrency children at once, never more")
	assert.Equal(t, 25, sum.Total)
	assert.Equal(t, 25, sum.Done)
	assert.Equal(t, 1, sum.Failed)
	assert.Equal(t, map[subagent.StopReason]int{subagent.StopCompleted: 24}, sum.ByStopReason)
	assert.Zero(t, sum.Running)
	assert.Zero(t, sum.Queued)
	assert.Equal(t, 24, sum.Durations.Count-1, "every task's duration is recorded")
	assert.InEpsilon(t, childRunTime, sum.Durations.Percentile(50), 1.0/16, "percentiles are within a sixteenth")
	assert.False(t, sum.Completed())

	require.Len(t, during, 3)
	for _, s := range during {
		assert.Equal(t, 25, s.Total)
		assert.LessOrEqual(t, s.Running, 4)
		assert.Equal(t, s.Total, s.Queued+s.Running+s.Done, "every task is queued, running or done: %+v", s)
	}
	assert.Less(t, during[0].Done, during[2].Done, "progress moves")

	results := resultsByIndex(t, f.Results(), 25)
	for i, r := range results {
		switch i {
		case 3:
			assert.Equal(t, "subagent depth 1 exceeds maxDepth 0", r.Error)
			assert.Empty(t, r.StopReason)
		default:
			assert.Equal(t, subagent.StopCompleted, r.StopReason, "task %d", i)
			assert.Equal(t, fmt.Sprintf("task %d", i), r.Output)
			assert.Equal(t, childRunTime.Milliseconds(), r.DurationMs)
		}
		assert.Equal(t, batchChildID("b1", i), r.ChildID)
		if i == 7 {
			assert.Equal(t, "my-own-id", r.WorkflowID)
		} else {
			assert.Equal(t, WorkflowID(r.ChildID), r.WorkflowID)
		}
		in := f.children[r.WorkflowID]
		assert.Equal(t, "b1", in.Batch)
		assert.Equal(t, r.ChildID, in.ChildID)
		assert.Equal(t, "b1", f.batchAttr[r.WorkflowID], "the child is searchable by its batch")
	}
	assert.JSONEq(t, `{"ok":true}`, string(results[5].Structured))
}

// TestBatchContinuesAsNewAtThreshold: a run starts ContinueAsNewAfter children, waits for
// them, and continues as new with the cursor, the unstarted rest of its page, the file
// position, the results file size and the counters; the chain of runs ends with every task
// run once.
func TestBatchContinuesAsNewAtThreshold(t *testing.T) {
	f := &batchFakes{file: batchTasks(250)}
	in := BatchInput{BatchID: "b2", TasksFile: "/tasks.jsonl", OutFile: "/out.jsonl", Defaults: batchDefaults,
		Concurrency: 30, ContinueAsNewAfter: 120}

	var sum BatchSummary
	var nexts []BatchInput
	for run := 1; ; run++ {
		require.LessOrEqual(t, run, 3, "the batch should need 3 runs")
		env := newBatchEnv(t, f)
		env.ExecuteWorkflow(Batch, in)
		require.True(t, env.IsWorkflowCompleted())
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			require.NoError(t, err)
			require.NoError(t, env.GetWorkflowResult(&sum))
			break
		}
		assert.Equal(t, BatchWorkflowName, can.WorkflowType.Name)
		in = BatchInput{}
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
		nexts = append(nexts, in)
		assert.LessOrEqual(t, f.peak, 30)
	}

	require.Len(t, nexts, 2)
	first := nexts[0].State
	assert.Equal(t, 120, first.Next)
	assert.Len(t, nexts[0].Tasks, 80, "the rest of the first 200-task page travels inline")
	assert.Equal(t, "task 120", nexts[0].Tasks[0].Task)
	assert.EqualValues(t, 200, first.FileOffset)
	assert.False(t, first.FileDone)
	assert.Equal(t, 120, first.Summary.Done)
	assert.Equal(t, 250, first.Summary.Total)
	assert.Positive(t, first.OutOffset)
	second := nexts[1].State
	assert.Equal(t, 240, second.Next)
	assert.Len(t, nexts[1].Tasks, 10)
	assert.True(t, second.FileDone)
	assert.Equal(t, "b2", nexts[1].BatchID)

	assert.Equal(t, 250, sum.Done)
	assert.Equal(t, 3, sum.Runs)
	assert.True(t, sum.Completed())
	results := resultsByIndex(t, f.Results(), 250)
	for i, r := range results {
		assert.Equal(t, fmt.Sprintf("task %d", i), r.Output)
		assert.Equal(t, batchChildID("b2", i), r.ChildID)
	}
	assert.Len(t, f.children, 250, "every task ran in its own child")
}

// TestBatchCancel: cancelling the batch cancels its running children, keeps their aborted
// results, starts nothing more and ends Canceled with the summary as details.
func TestBatchCancel(t *testing.T) {
	f := &batchFakes{}
	env := newBatchEnv(t, f)
	env.RegisterDelayedCallback(env.CancelWorkflow, childRunTime/2)
	env.ExecuteWorkflow(Batch, BatchInput{BatchID: "b3", Tasks: batchTasks(6), Defaults: batchDefaults,
		Concurrency: 3, OutFile: "/out.jsonl"})
	require.True(t, env.IsWorkflowCompleted())

	var canceled *temporal.CanceledError
	require.ErrorAs(t, env.GetWorkflowError(), &canceled)
	var sum BatchSummary
	require.NoError(t, canceled.Details(&sum))
	assert.Equal(t, 6, sum.Total)
	assert.Equal(t, 3, sum.Done)
	assert.Equal(t, 3, sum.Queued, "tasks not started stay queued")
	assert.Equal(t, map[subagent.StopReason]int{subagent.StopAborted: 3}, sum.ByStopReason)

	results := resultsByIndex(t, f.Results(), 3)
	for _, r := range results {
		assert.Equal(t, subagent.StopAborted, r.StopReason)
		assert.Equal(t, "partial", r.Output, "the aborted child's partial output is kept")
	}
	assert.Len(t, f.children, 3)
}

// TestBatchRejectsRelativePaths: the worker cannot know what a relative path meant.
func TestBatchRejectsRelativePaths(t *testing.T) {
	env := newBatchEnv(t, &batchFakes{})
	env.ExecuteWorkflow(Batch, BatchInput{TasksFile: "tasks.jsonl"})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, env.GetWorkflowError(), &appErr)
	assert.Equal(t, RuleInvalidBatch, appErr.Type())
}
