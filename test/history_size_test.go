package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
