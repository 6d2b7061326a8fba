package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// startBatch starts a Batch workflow with a fresh id on the shared worker.
func startBatch(t testing.TB, in workflows.BatchInput) client.WorkflowRun {
	t.Helper()
	if in.BatchID == "" {
		in.BatchID = "batch-" + uuid.NewString()
	}
	if in.Total == 0 {
		in.Total = len(in.Tasks)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.BatchID, TaskQueue: env.taskQueue},
		workflows.BatchWorkflowName, in)
	require.NoError(t, err)
	return run
}

// batchProgress queries a running batch.
func batchProgress(t testing.TB, id string) (workflows.BatchSummary, error) {
	t.Helper()
	var s workflows.BatchSummary
	v, err := env.c.QueryWorkflow(context.Background(), id, "", workflows.QueryProgress)
	if err != nil {
		return s, err
	}
	return s, v.Get(&s)
}

// readResults reads a batch's results from Temporal, by task number; each task must have
// one, and they come in task order.
func readResults(t testing.TB, c client.Client, batchID string) map[int]workflows.BatchResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	results, err := subflow.BatchResults(ctx, c, batchID, subflow.BatchResultsOptions{Wait: waitLimit / 2})
	require.NoError(t, err)
	got := map[int]workflows.BatchResult{}
	for i, r := range results {
		_, dup := got[r.Index]
		require.False(t, dup, "task %d has two results", r.Index)
		if i > 0 {
			require.Less(t, results[i-1].Index, r.Index, "results in task order")
		}
		got[r.Index] = r
	}
	return got
}

// scriptedTask is a task of a new root session in dir answering with scriptPath.
func scriptedTask(provider, dir, scriptPath, text string) workflows.Task {
	return workflows.Task{Provider: provider, Task: text, Cwd: dir, ModelProvider: model.ProviderScripted, Model: scriptPath}
}

// spawnTasks is n spawn tasks in dir answering with scriptPath, "task 0" to "task n-1".
func spawnTasks(dir, scriptPath string, n int) []workflows.Task {
	tasks := make([]workflows.Task, n)
	for i := range tasks {
		tasks[i] = scriptedTask(subagent.ProviderSpawn, dir, scriptPath, fmt.Sprintf("task %d", i))
	}
	return tasks
}

// TestBatchMixedProviders runs a 50-task batch of spawn, fork, sdk and structured tasks: the
// progress query adds up while it runs, every result is in the results file with its own
// answer, and every child carries the batch id.
func TestBatchMixedProviders(t *testing.T) {
	dir := t.TempDir()
	// The fork tasks fork this spawn child: its seed consumed two responses, so each fork
	// answers with the third.
	forkParent := script(t, dir,
		`{"toolCalls": [{"name": "list_dir", "input": {}}]}`,
		`{"text": "spawn answer"}`,
		`{"text": "fork answer", "delayMs": 100}`)
	pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, forkParent, "look around"))
	_, cancelled := outcome(t, run)
	require.False(t, cancelled)

	const n = 50
	tasks := make([]workflows.Task, n)
	want := make([]string, n)
	for i := range tasks {
		answer := fmt.Sprintf("answer %d", i)
		switch {
		case i == 2:
			tasks[i] = scriptedTask(subagent.ProviderSpawn, dir, script(t, dir,
				fmt.Sprintf(`{"toolCalls": [{"name": "structured_output", "input": {"n": %d}}]}`, i)), "structured")
			tasks[i].Schema = json.RawMessage(`{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}`)
			answer = ""
		case i%10 == 1:
			tasks[i] = workflows.Task{Provider: subagent.ProviderFork, Task: "and then?", Parent: pub.ChildID}
			answer = "fork answer"
		case i%10 == 0:
			tasks[i] = scriptedTask(subagent.ProviderSDK, dir, script(t, dir, fmt.Sprintf(`{"text": %q, "delayMs": 100}`, answer)), "from a process")
		default:
			tasks[i] = scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, fmt.Sprintf(`{"text": %q, "chunks": 2, "delayMs": 100}`, answer)), "spawn")
		}
		tasks[i].Label = fmt.Sprintf("task %d", i)
		want[i] = answer
	}
	batchID := "batch-" + uuid.NewString()
	brun := startBatch(t, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Concurrency: 8})

	// Progress while it runs: every task is queued, running or done, never more than 8 run.
	done := make(chan error, 1)
	var sum workflows.BatchSummary
	go func() { done <- brun.Get(context.Background(), &sum) }()
	var polls []workflows.BatchSummary
	deadline := time.After(waitLimit)
poll:
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			break poll
		case <-deadline:
			t.Fatal("the batch did not end")
		case <-time.After(50 * time.Millisecond):
			if p, err := batchProgress(t, batchID); err == nil {
				polls = append(polls, p)
			}
		}
	}
	require.NotEmpty(t, polls)
	for i, p := range polls {
		assert.Equal(t, n, p.Total)
		assert.Equal(t, n, p.Queued+p.Running+p.Done, "poll %d: %+v", i, p)
		assert.LessOrEqual(t, p.Running, 8)
		completed := p.ByStopReason[subagent.StopCompleted]
		assert.Equal(t, p.Done, completed+p.Failed)
		if i > 0 {
			assert.GreaterOrEqual(t, p.Done, polls[i-1].Done, "done never goes back")
		}
	}

	assert.True(t, sum.Completed(), "%+v", sum)
	assert.Equal(t, n, sum.Done)
	assert.Equal(t, 1, sum.Runs)
	results := readResults(t, env.c, batchID)
	require.Len(t, results, n)
	for i := range n {
		r := results[i]
		assert.Equal(t, subagent.StopCompleted, r.StopReason, "task %d: %+v", i, r)
		assert.Equal(t, fmt.Sprintf("task %d", i), r.Label)
		assert.Empty(t, r.Error)
		if i != 2 {
			assert.Equal(t, want[i], r.Output, "task %d", i)
		}
	}
	assert.JSONEq(t, `{"n": 2}`, string(results[2].Structured))
	assert.EqualValues(t, 2, results[1].Depth, "a fork of a depth-1 child has depth 2")

	requireListed(t, fmt.Sprintf("SubagentBatch = '%s' AND SubagentProvider = 'sdk'", batchID),
		[]string{results[0].WorkflowID, results[10].WorkflowID, results[20].WorkflowID, results[30].WorkflowID, results[40].WorkflowID})
}

// TestBatchContinueAsNew runs a batch over a small continue-as-new threshold: it takes
// several runs and every task still runs once.
func TestBatchContinueAsNew(t *testing.T) {
	batchID, firstRun, sum := runOKBatch(t, 30, 4, 10)
	assert.Equal(t, 3, sum.Runs, "30 tasks at 10 a run")
	assert.Equal(t, 30, sum.Total)

	// A timer still pending when a run closes can fire while the closing workflow task is
	// out, which fails the task (and the worker then replays the whole run): each run's
	// drain cancels its timer once the children it waited for have ended.
	eachRunHistory(t, batchID, firstRun, func(n int, events []*historypb.HistoryEvent) {
		pending := map[int64]bool{}
		for _, ev := range events {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_TIMER_STARTED:
				pending[ev.GetEventId()] = true
			case enumspb.EVENT_TYPE_TIMER_FIRED:
				delete(pending, ev.GetTimerFiredEventAttributes().GetStartedEventId())
			case enumspb.EVENT_TYPE_TIMER_CANCELED:
				delete(pending, ev.GetTimerCanceledEventAttributes().GetStartedEventId())
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				assert.Empty(t, pending, "run %d of %d continued as new with its drain's timer pending", n, sum.Runs)
			}
		}
	})
}

// TestBatchStartsABurstAtATime: a batch whose concurrency would let it start 40 children at
// once asks the server for 16 at a time (workflows' startBurst), in its first run and again
// after it continues as new, read from each run's history: children initiated and not yet
// started never exceed 16, and reach it, so the bound is what holds them. Every task still
// runs once. Its first run is recorded for the replay test (batch-burst).
func TestBatchStartsABurstAtATime(t *testing.T) {
	t.Parallel()
	const burst = 16
	batchID, firstRun, sum := runOKBatch(t, 40, 40, 20)
	assert.Equal(t, 2, sum.Runs, "40 tasks at 20 a run")
	// Recorded for the replay test: a change of the bound changes this shape.
	record(t, env.c.GetWorkflow(context.Background(), batchID, firstRun), "batch-burst")
	eachRunHistory(t, batchID, firstRun, func(n int, events []*historypb.HistoryEvent) {
		starting, most := 0, 0
		for _, ev := range events {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
				starting++
				most = max(most, starting)
			case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED:
				starting--
			}
		}
		assert.Equal(t, burst, most, "run %d: children asked of the server and not yet started, at most", n)
	})
}

// runOKBatch runs a batch of n spawn tasks that each answer "ok", at concurrency, continuing
// as new after continueAsNewAfter starts, and checks that every task completed once. It
// returns the batch's id, its first run's id and its summary.
func runOKBatch(t *testing.T, n, concurrency, continueAsNewAfter int) (batchID, firstRun string, sum workflows.BatchSummary) {
	t.Helper()
	dir := t.TempDir()
	answer := script(t, dir, `{"text": "ok"}`)
	var tasks []workflows.Task
	for i := range n {
		tasks = append(tasks, scriptedTask(subagent.ProviderSpawn, dir, answer, fmt.Sprintf("task %d", i)))
	}
	batchID = "batch-" + uuid.NewString()
	run := startBatch(t, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Concurrency: concurrency, ContinueAsNewAfter: continueAsNewAfter})
	firstRun = run.GetRunID() // Get moves the run along the chain to its last run
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	require.NoError(t, run.Get(ctx, &sum))
	assert.True(t, sum.Completed(), "%+v", sum)
	results := readResults(t, env.c, batchID)
	require.Len(t, results, n)
	for i := range n {
		assert.Equal(t, "ok", results[i].Output, "task %d", i)
	}
	return batchID, firstRun, sum
}

// eachRunHistory calls check with the history of each run of the workflow batchID, from
// runID along its continue-as-new chain, numbered from 1.
func eachRunHistory(t *testing.T, batchID, runID string, check func(n int, events []*historypb.HistoryEvent)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for n := 1; runID != ""; n++ {
		var events []*historypb.HistoryEvent
		next := ""
		iter := env.c.GetWorkflowHistory(ctx, batchID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			require.NoError(t, err)
			events = append(events, ev)
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		check(n, events)
		runID = next
	}
}

// TestBatchResultsIgnoreARunPosingAsATask: a run any client started with the batch's search
// attribute and a task's number in its memo, closed after the batch and so listed first, does
// not stand in for that task's result.
func TestBatchResultsIgnoreARunPosingAsATask(t *testing.T) {
	dir := t.TempDir()
	answer := script(t, dir, `{"text": "ok"}`)
	batchID := "batch-" + uuid.NewString()
	run := startBatch(t, workflows.BatchInput{BatchID: batchID, Concurrency: 2, Tasks: []workflows.Task{
		scriptedTask(subagent.ProviderSpawn, dir, answer, "task 0"), scriptedTask(subagent.ProviderSpawn, dir, answer, "task 1")}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	require.NoError(t, run.Get(ctx, nil))

	poser := startPoser(t, batchID, 0, 3)
	results := readResults(t, env.c, batchID)
	require.Len(t, results, 2)
	for i := range 2 {
		assert.Equal(t, "ok", results[i].Output, "task %d", i)
		assert.NotEqual(t, poser, results[i].WorkflowID, "task %d", i)
	}
}

// startPoser starts and closes a StartSubagent run that poses as task n of batch: it carries
// the batch's search attribute and n in its memo, as any client may set them, but the batch
// did not start it. It returns once visibility lists listed closed runs of the batch, the
// poser among them, and returns the poser's workflow id.
func startPoser(t *testing.T, batch string, n, listed int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// No worker polls its queue: terminated, it closes with no output of the task's.
	poser, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "poser-" + uuid.NewString(), TaskQueue: "nobody-polls-" + uuid.NewString(),
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrBatch.ValueSet(batch)),
		Memo:                  map[string]any{workflows.MemoBatchIndex: n}}, workflows.WorkflowName, workflows.StartInput{})
	require.NoError(t, err)
	require.NoError(t, env.c.TerminateWorkflow(ctx, poser.GetID(), poser.GetRunID(), fmt.Sprintf("posing as task %d", n)))
	require.Eventually(t, func() bool {
		resp, err := env.c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Query: fmt.Sprintf("SubagentBatch = %q AND ExecutionStatus != 'Running'", batch)})
		return err == nil && resp.GetCount() == int64(listed)
	}, waitLimit, 50*time.Millisecond, "visibility lists the poser beside the batch's runs")
	return poser.GetID()
}

// TestBatchCancel cancels a batch while three slow children (spawn and sdk) run: they end
// aborted with their partial output kept, the other tasks never start, and the batch
// ends Canceled with its summary.
func TestBatchCancel(t *testing.T) {
	dir := t.TempDir()
	slow := slowScript(t, dir)
	tasks := []workflows.Task{scriptedTask(subagent.ProviderSDK, dir, slow, "slow sdk")}
	for range 9 {
		tasks = append(tasks, scriptedTask(subagent.ProviderSpawn, dir, slow, "slow spawn"))
	}
	batchID := "batch-" + uuid.NewString()
	for i := range tasks { // known workflow ids, so the test can watch each child
		tasks[i].ID = fmt.Sprintf("%s-task-%d", batchID, i)
	}
	run := startBatch(t, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Concurrency: 3})

	// Cancel once three children have streamed text, so there is partial output to keep.
	require.Eventually(t, func() bool {
		streaming := 0
		for _, task := range tasks {
			st, err := subflow.Describe(context.Background(), env.c, task.ID, "")
			if err == nil && st.Progress != nil && st.Progress.Tail != "" {
				streaming++
			}
		}
		return streaming == 3
	}, waitLimit, 50*time.Millisecond, "three children never streamed")
	require.NoError(t, env.c.CancelWorkflow(context.Background(), batchID, ""))

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := run.Get(ctx, nil)
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "the batch ends Canceled: %v", err)
	var sum workflows.BatchSummary
	require.NoError(t, canceled.Details(&sum))
	assert.Equal(t, 10, sum.Total)
	assert.Equal(t, 3, sum.Done)
	assert.Equal(t, 7, sum.Queued)
	assert.Equal(t, map[subagent.StopReason]int{subagent.StopAborted: 3}, sum.ByStopReason)

	results := readResults(t, env.c, batchID)
	require.Len(t, results, 3)
	for i, r := range results {
		assert.Equal(t, subagent.StopAborted, r.StopReason, "task %d", i)
		assert.NotEmpty(t, r.Output, "task %d keeps its partial output", i)
		assert.True(t, strings.HasPrefix(slowText, r.Output), "task %d: %q", i, r.Output)
	}
	assert.Contains(t, results, 0, "the sdk task was among the running")
}
