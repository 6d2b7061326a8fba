package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestHistoryBounded checks contract R-74: a long run and a 2-step run with the same final answer
// have the same number of history events, and their history sizes differ by less than the
// size of that answer and the digest's bound (subagent.MaxDigestBytes): the digest is the only
// part of the history that tells the steps apart, and it stops growing at its bound. The long run takes the agent's step cap of 50 steps with 4 tool calls
// each (196 tool calls) and streams its answer in 200 chunks.
func TestHistoryBounded(t *testing.T) {
	t.Parallel()
	answer := strings.Repeat("the transcript never enters the workflow history. ", 4)
	final := func(chunks int) string { return fmt.Sprintf(`{"text": %q, "chunks": %d}`, answer, chunks) }
	listDir := `{"name": "list_dir", "input": {}}`
	var long []string
	for range 49 {
		long = append(long, `{"toolCalls": [`+strings.Join([]string{listDir, listDir, listDir, listDir}, ",")+`]}`)
	}
	long = append(long, final(200))
	short := []string{`{"toolCalls": [` + listDir + `]}`, final(1)}

	size := func(responses []string) (events, bytes int64, steps int) {
		dir := t.TempDir()
		pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, script(t, dir, responses...), "list the directory"))
		out, cancelled := outcome(t, run)
		require.False(t, cancelled)
		require.Equal(t, answer, session.JoinText(out.Result.Output))
		_, log, err := openFileStore(t, env.sessionRoot).Load(context.Background(), pub.ChildID)
		require.NoError(t, err)
		desc, err := env.c.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
		require.NoError(t, err)
		info := desc.GetWorkflowExecutionInfo()
		t.Logf("%d steps: %d transcript events; history %d events, %d bytes", len(responses), len(log),
			info.GetHistoryLength(), info.GetHistorySizeBytes())
		return info.GetHistoryLength(), info.GetHistorySizeBytes(), len(log)
	}
	longEvents, longBytes, longLog := size(long)
	shortEvents, shortBytes, shortLog := size(short)
	require.Greater(t, longLog, 20*shortLog, "the long transcript is much longer")
	assert.Equal(t, shortEvents, longEvents, "the same number of history events")
	diff := longBytes - shortBytes
	if diff < 0 {
		diff = -diff
	}
	assert.Less(t, diff, int64(len(answer)+subagent.MaxDigestBytes),
		"history sizes differ by less than the final output (%d bytes) and the digest's bound", len(answer))
}

// TestRecordBatchHistory runs a two-task Batch to completion and records its history for
// the replay test (batch-completed.json is the first Batch workflow's, kept for replay).
func TestRecordBatchHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tasks := []workflows.Task{
		scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "first"}`), "one"),
		scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "second"}`), "two"),
	}
	batchID := "batch-" + uuid.NewString()
	run := startBatch(t, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Concurrency: 2})
	var sum workflows.BatchSummary
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	require.NoError(t, run.Get(ctx, &sum))
	got := readResults(t, env.c, batchID)
	require.Len(t, got, 2)
	record(t, run, "batch-completed")
}

// TestRecordBatchDrainHistories: a run due to continue as new drains its children, and a child
// longer than the drain is handed over to the next run, which awaits it by id. The slow task
// takes 5 s, well past the 2 s the first drain waits before any task has ended, so run 1's
// drain timer fires and it continues as new with that child running; run 2 awaits it with
// AwaitChild and counts it once. Both runs are recorded for the replay test (batch-drained,
// batch-inherited): the shape every large batch takes at each continue-as-new.
func TestRecordBatchDrainHistories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tasks := []workflows.Task{
		scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "slow", "delayMs": 5000}`), "slow"),
		scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "fast"}`), "fast"),
		scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "after"}`), "after"),
	}
	batchID := "batch-" + uuid.NewString()
	run := startBatch(t, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Concurrency: 2, ContinueAsNewAfter: 2})
	first := run.GetRunID() // Get moves the run along the chain to its last run
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var sum workflows.BatchSummary
	require.NoError(t, run.Get(ctx, &sum))
	assert.True(t, sum.Completed(), "%+v", sum)
	assert.Equal(t, 2, sum.Runs)
	results := readResults(t, env.c, batchID)
	require.Len(t, results, 3)
	for i, want := range []string{"slow", "fast", "after"} {
		assert.Equal(t, want, results[i].Output, "task %d", i)
	}

	var fired bool
	var next workflows.BatchInput
	var second string
	iter := env.c.GetWorkflowHistory(ctx, batchID, first, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_TIMER_FIRED:
			fired = true
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			attrs := ev.GetWorkflowExecutionContinuedAsNewEventAttributes()
			second = attrs.GetNewExecutionRunId()
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &next))
		}
	}
	assert.True(t, fired, "run 1's drain ended on its timer, with the slow child running")
	require.NotEmpty(t, second, "run 1 continued as new")
	require.NotNil(t, next.State)
	var handed []int
	for _, rt := range next.State.Running {
		handed = append(handed, rt.Index)
	}
	assert.Contains(t, handed, 0, "the slow child is handed over")

	record(t, env.c.GetWorkflow(ctx, batchID, first), "batch-drained")
	record(t, env.c.GetWorkflow(ctx, batchID, second), "batch-inherited")
}
