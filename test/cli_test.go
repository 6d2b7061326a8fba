package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestStarterCancelOfAClosedRun cancels a run that already completed: cancel exits 1 and
// says the run is closed and how it ended, and the run's outcome stays completed.
func TestStarterCancelOfAClosedRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := "e2e-cancel-closed-" + uuid.NewString()
	code, _, stderr := runStarter(t, dir, "run", "--id", id, "--model-provider", "scripted",
		"--model", script(t, dir, `{"text": "done"}`), "quick")
	require.Equal(t, 0, code, "stderr: %s", stderr)

	code, stdout, stderr := runStarter(t, dir, "cancel", id)
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "starter cancel: workflow "+id+" is closed (completed); nothing to cancel\n", stderr)

	code, _, stderr = runStarter(t, dir, "result", id)
	assert.Equal(t, 0, code, "still completed: %s", stderr)
}

// TestStarterStatusOfABatch asks `starter status` about a batch id: it shows the batch and
// its progress, as text and as JSON.
func TestStarterStatusOfABatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	batchID := "batch-" + uuid.NewString()
	run := startBatch(t, workflows.BatchInput{BatchID: batchID, Concurrency: 2,
		Tasks: []workflows.Task{
			scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "one"}`), "one"),
			scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "two"}`), "two"),
		}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	require.NoError(t, run.Get(ctx, nil))

	code, stdout, stderr := runStarter(t, dir, "status", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.True(t, strings.HasPrefix(stdout, "batch     "+batchID+"\nstatus    completed\n"), "stdout: %s", stdout)
	assert.Contains(t, stdout, "2/2 done (0 running, 0 queued, 2 completed, 0 failed)")

	code, stdout, stderr = runStarter(t, dir, "status", "--json", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, `"kind":"batch","status":"completed","batchId":"`+batchID+`","total":2`)
}

// TestStarterRunTimeout runs a child whose model is slower than the run's --timeout: the
// deadline aborts the drive as a cancel would, and the run ends aborted with the partial
// answer (exit 3), completed rather than Canceled.
func TestStarterRunTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := "e2e-timeout-" + uuid.NewString()
	slow := script(t, dir, `{"text": "`+slowText+`", "chunks": 20, "delayMs": 20000}`)
	code, stdout, stderr := runStarter(t, dir, "run", "--json", "--id", id, "--timeout", "3s",
		"--model-provider", "scripted", "--model", slow, "slow")
	require.Equal(t, 3, code, "stderr: %s", stderr)
	res := decodeStarterJSON(t, stdout)
	assert.Equal(t, "aborted", res.StopReason)
	assert.True(t, strings.HasPrefix(slowText, res.Output), "the partial answer: %q", res.Output)
	assert.NotEqual(t, slowText, res.Output, "the deadline ended it mid-stream")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	run := env.c.GetWorkflow(ctx, id, res.RunID)
	var out workflows.Outcome
	require.NoError(t, run.Get(ctx, &out), "a run past its deadline completes, with the aborted outcome")
	assert.Equal(t, "aborted", string(out.Result.StopReason))
	record(t, run, "spawn-timeout")
}
