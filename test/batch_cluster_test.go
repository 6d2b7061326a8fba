package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// batchLimit only keeps a broken large-batch test from hanging.
const batchLimit = 15 * time.Minute

// writeTaskFile writes tasks as a JSONL file in dir.
func writeTaskFile(t testing.TB, dir string, tasks []workflows.Task) string {
	t.Helper()
	var b strings.Builder
	for _, task := range tasks {
		line, err := json.Marshal(task)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// waitBatch waits for a batch (across its continue-as-new runs) and returns its summary.
func waitBatch(t testing.TB, batchID string, limit time.Duration) workflows.BatchSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var sum workflows.BatchSummary
	require.NoError(t, env.c.GetWorkflow(ctx, batchID, "").Get(ctx, &sum))
	return sum
}

// parseResults decodes `starter batch results` output: one result a line, each task once.
func parseResults(t testing.TB, stdout string) map[int]workflows.BatchResult {
	t.Helper()
	got := map[int]workflows.BatchResult{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r workflows.BatchResult
		require.NoError(t, json.Unmarshal([]byte(line), &r), "line %q", line)
		_, dup := got[r.Index]
		require.False(t, dup, "task %d has two results", r.Index)
		got[r.Index] = r
	}
	return got
}

// TestBatchAcrossHosts: a 1,001-task batch shares no path between starter and worker. The
// starter returns with --detach once the batch holds every task and the tasks file is
// deleted at once; a worker in another process, in another working directory, runs them
// all; `starter batch results` from a third directory returns every task once, and
// `starter transcript --task` there finds a task's run past the first page of the batch's
// runs.
func TestBatchAcrossHosts(t *testing.T) {
	f := newFaultEnv(t, "")
	f.workDir = t.TempDir()
	f.startWorker()

	cwd, starterDir, readerDir := t.TempDir(), t.TempDir(), t.TempDir()
	answer := script(t, cwd, `{"text": "ok"}`)
	const n = 1001 // three runs of the batch, and results past a page of 1,000
	tasks := make([]workflows.Task, n)
	ids := uuid.NewString()
	for i := range tasks {
		tasks[i] = scriptedTask(subagent.ProviderSpawn, cwd, answer, fmt.Sprintf("task %d", i))
		tasks[i].Label = fmt.Sprintf("t%d", i)
		// Runs named by their tasks: the starter finds a task's run by listing the batch's
		// runs, not by the id derived from its number.
		tasks[i].ID = fmt.Sprintf("across-%s-%d", ids, i)
	}
	tasksFile := writeTaskFile(t, starterDir, tasks)
	code, stdout, stderr := runStarter(t, starterDir, "batch", "--detach", "--task-queue", f.taskQueue,
		"--concurrency", "50", tasksFile)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	require.NoError(t, os.Remove(tasksFile))
	batchID := strings.TrimSpace(stdout)
	require.True(t, strings.HasPrefix(batchID, "batch-"), "stdout: %q", stdout)

	sum := waitBatch(t, batchID, batchLimit)
	assert.True(t, sum.Completed(), "%+v", sum)
	assert.Equal(t, n, sum.Done)
	assert.GreaterOrEqual(t, sum.Runs, 3, "1,001 tasks at 500 a run")

	code, stdout, stderr = runStarter(t, readerDir, "batch", "results", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	results := parseResults(t, stdout)
	require.Len(t, results, n)
	for i := range n {
		r := results[i]
		assert.Equal(t, subagent.StopCompleted, r.StopReason, "task %d", i)
		assert.Equal(t, "ok", r.Output, "task %d", i)
		assert.Equal(t, fmt.Sprintf("t%d", i), r.Label)
	}

	k := taskPastFirstPage(t, batchID)
	tr := transcriptOf(t, readerDir, "--task", fmt.Sprint(k), batchID)
	assert.Equal(t, []string{fmt.Sprintf("prompt task %d", k), "step", "text ok", "turn-end completed"}, kinds(tr))

	entries, err := os.ReadDir(starterDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing was written at the starter's side")
}

// taskPastFirstPage returns the task number of a run of batch that visibility lists after
// the first 1,000, the page size `starter transcript --task` lists the batch's runs by.
func taskPastFirstPage(t *testing.T, batch string) int {
	t.Helper()
	query := fmt.Sprintf("SubagentBatch = %q AND WorkflowType = %q", batch, workflows.WorkflowName)
	first, err := env.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000})
	require.NoError(t, err)
	require.NotEmpty(t, first.GetNextPageToken(), "the batch's runs fill more than one page")
	rest, err := env.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: query, PageSize: 1000, NextPageToken: first.GetNextPageToken()})
	require.NoError(t, err)
	require.NotEmpty(t, rest.GetExecutions(), "a run past the first page")
	var k int
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(
		rest.GetExecutions()[0].GetMemo().GetFields()[workflows.MemoBatchIndex], &k))
	return k
}

// TestBatchLongChildKeepsFlowing: one child streams for 2 minutes while 300 short tasks run
// at concurrency 20 over runs of 100: the short tasks all finish while the long one still
// runs, across continue-as-new. The batch is then cancelled by update and the long child,
// started by an earlier run, ends aborted.
func TestBatchLongChildKeepsFlowing(t *testing.T) {
	dir := t.TempDir()
	// A piece a second: the long child has partial output well before the short tasks end.
	long := script(t, dir, `{"text": "`+slowText+`", "chunks": 120, "delayMs": 120000}`)
	short := script(t, dir, `{"text": "ok"}`)
	tasks := []workflows.Task{scriptedTask(subagent.ProviderSpawn, dir, long, "long")}
	for range 300 {
		tasks = append(tasks, scriptedTask(subagent.ProviderSpawn, dir, short, "short"))
	}
	run := startBatch(t, workflows.BatchInput{Tasks: tasks, Concurrency: 20, ContinueAsNewAfter: 100})
	batchID := run.GetID()

	var p workflows.BatchSummary
	require.Eventually(t, func() bool {
		var err error
		p, err = batchProgress(t, batchID)
		return err == nil && p.Done == 300
	}, 3*waitLimit, 100*time.Millisecond, "the short tasks never finished: %+v", p)
	assert.Equal(t, 1, p.Running, "the long task still runs: %+v", p)
	assert.Equal(t, 300, p.ByStopReason[subagent.StopCompleted])
	assert.GreaterOrEqual(t, p.Runs, 3, "the batch continued as new with the long child running")
	// Visibility follows the closes of the short children a little later.
	var resp *workflowservice.ListWorkflowExecutionsResponse
	require.Eventually(t, func() bool {
		var err error
		resp, err = env.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("SubagentBatch = %q AND ExecutionStatus = 'Running'", batchID)})
		return err == nil && len(resp.GetExecutions()) == 1
	}, waitLimit, 50*time.Millisecond, "only the long child runs")
	var index int
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(
		resp.GetExecutions()[0].GetMemo().GetFields()[workflows.MemoBatchIndex], &index))
	assert.Equal(t, 0, index)

	code, stdout, stderr := runStarter(t, dir, "batch", "cancel", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "cancelled")
	sum := waitBatch(t, batchID, waitLimit)
	assert.True(t, sum.Cancelled)
	assert.Equal(t, 301, sum.Done)
	assert.Equal(t, 1, sum.ByStopReason[subagent.StopAborted], "%+v", sum)
	results := readResults(t, env.c, batchID)
	require.Len(t, results, 301)
	assert.Equal(t, subagent.StopAborted, results[0].StopReason)
	assert.NotEmpty(t, results[0].Output, "the long task keeps its partial output")
}

// TestBatchLiveControl drives a batch with the starter: pause stops new children (the
// running ones end and nothing starts), resize 5 → 20 and resume raise the running count,
// and retry starts a new batch of exactly the failed tasks, linked by SubagentRetryOf.
func TestBatchLiveControl(t *testing.T) {
	dir := t.TempDir()
	slowish := script(t, dir, `{"text": "ok", "chunks": 4, "delayMs": 2000}`)
	failing := script(t, dir, `{"error": "model exploded"}`)
	const n = 60
	tasks := make([]workflows.Task, n)
	failed := map[string]bool{}
	for i := range tasks {
		tasks[i] = scriptedTask(subagent.ProviderSpawn, dir, slowish, "work")
		tasks[i].Label = fmt.Sprintf("t%d", i)
		if i%10 == 3 {
			tasks[i].Model = failing
			failed[tasks[i].Label] = true
		}
	}
	tasksFile := writeTaskFile(t, dir, tasks)
	code, stdout, stderr := runStarter(t, dir, "batch", "--detach", "--task-queue", env.taskQueue, "--concurrency", "5", tasksFile)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	batchID := strings.TrimSpace(stdout)

	require.Eventually(t, func() bool {
		p, err := batchProgress(t, batchID)
		return err == nil && p.Running == 5
	}, waitLimit, 50*time.Millisecond)
	code, stdout, stderr = runStarter(t, dir, "batch", "pause", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "paused")
	atPause, err := batchProgress(t, batchID)
	require.NoError(t, err)
	started := atPause.Done + atPause.Running
	require.Less(t, started, n)
	var p workflows.BatchSummary
	require.Eventually(t, func() bool {
		p, err = batchProgress(t, batchID)
		return err == nil && p.Running == 0
	}, waitLimit, 50*time.Millisecond)
	assert.Equal(t, started, p.Done, "no child started while paused")
	assert.True(t, p.Paused)

	code, _, stderr = runStarter(t, dir, "batch", "resize", batchID, "--concurrency", "20")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	code, stdout, stderr = runStarter(t, dir, "batch", "resume", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "concurrency 20, running")
	require.Eventually(t, func() bool {
		p, err = batchProgress(t, batchID)
		return err == nil && p.Running > 5
	}, waitLimit, 50*time.Millisecond, "resize 5 → 20 never raised the running count")

	sum := waitBatch(t, batchID, 3*waitLimit)
	assert.Equal(t, n, sum.Done)
	assert.Equal(t, len(failed), sum.ByStopReason[subagent.StopError], "%+v", sum)

	code, stdout, stderr = runStarter(t, dir, "batch", "retry", "--detach", "--task-queue", env.taskQueue, batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	retryID := strings.TrimSpace(stdout)
	retrySum := waitBatch(t, retryID, waitLimit)
	assert.Equal(t, len(failed), retrySum.Total)
	retried := map[string]bool{}
	for _, r := range readResults(t, env.c, retryID) {
		retried[r.Label] = true
	}
	assert.Equal(t, failed, retried, "retry starts exactly the failed tasks")
	requireListed(t, fmt.Sprintf("SubagentRetryOf = '%s'", batchID), []string{retryID})
}

// TestBatchResultsByReference: `starter batch results` writes a task's result stored by
// reference (over one Temporal payload) in full, from a directory the workers never see.
func TestBatchResultsByReference(t *testing.T) {
	f := newFaultEnv(t, "")
	f.workDir = t.TempDir()
	f.startWorker()

	cwd, starterDir := t.TempDir(), t.TempDir()
	big := strings.Repeat("big answer ", workflows.PayloadThreshold/5)
	tasks := []workflows.Task{
		scriptedTask(subagent.ProviderSpawn, cwd, script(t, cwd, `{"text": "`+big+`"}`), "big"),
		scriptedTask(subagent.ProviderSpawn, cwd, script(t, cwd, `{"text": "ok"}`), "small"),
	}
	code, stdout, stderr := runStarter(t, starterDir, "batch", "--detach", "--task-queue", f.taskQueue,
		writeTaskFile(t, starterDir, tasks))
	require.Equal(t, 0, code, "stderr: %s", stderr)
	batchID := strings.TrimSpace(stdout)
	sum := waitBatch(t, batchID, waitLimit)
	require.True(t, sum.Completed(), "%+v", sum)

	code, stdout, stderr = runStarter(t, t.TempDir(), "batch", "results", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	results := parseResults(t, stdout)
	require.Len(t, results, 2)
	assert.Equal(t, big, results[0].Output, "the big result in full")
	assert.Equal(t, "ok", results[1].Output)
}
