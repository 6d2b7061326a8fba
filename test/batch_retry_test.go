package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestBatchRetryAfterCancel: `starter batch retry` on a running batch refuses (exit 2) and
// says why; after `batch cancel` it starts exactly the tasks that did not complete — the
// aborted ones and those never started (docs/cli.md) — not only those that ran.
func TestBatchRetryAfterCancel(t *testing.T) {
	dir := t.TempDir()
	slow := script(t, dir, `{"text": "slow answer", "chunks": 10, "delayMs": 60000}`)
	const n = 12
	tasks := make([]workflows.Task, n)
	var labels []string
	for i := range tasks {
		tasks[i] = scriptedTask(subagent.ProviderSpawn, dir, slow, "work")
		tasks[i].Label = fmt.Sprintf("t%d", i)
		labels = append(labels, tasks[i].Label)
	}
	code, stdout, stderr := runStarter(t, dir, "batch", "--detach", "--task-queue", env.taskQueue, "--concurrency", "3", writeTaskFile(t, dir, tasks))
	require.Equal(t, 0, code, "stderr: %s", stderr)
	batchID := strings.TrimSpace(stdout)
	require.Eventually(t, func() bool {
		p, err := batchProgress(t, batchID)
		return err == nil && p.Running == 3
	}, waitLimit, 50*time.Millisecond)

	code, _, stderr = runStarter(t, dir, "batch", "retry", "--detach", "--task-queue", env.taskQueue, batchID)
	assert.Equal(t, 2, code, "retry of a running batch: %s", stderr)
	assert.Contains(t, stderr, batchID+" is still running (0 of 12 tasks done)")

	code, _, stderr = runStarter(t, dir, "batch", "cancel", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	sum := waitBatch(t, batchID, waitLimit)
	require.Equal(t, 3, sum.ByStopReason[subagent.StopAborted], "%+v", sum)

	code, stdout, stderr = runStarter(t, dir, "batch", "retry", "--detach", "--task-queue", env.taskQueue, batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	retryID := strings.TrimSpace(stdout)
	defer runStarter(t, dir, "batch", "cancel", retryID)
	given, _, err := subflow.BatchTasks(t.Context(), env.c, retryID)
	require.NoError(t, err)
	var retried []string
	for _, task := range given {
		retried = append(retried, task.Label)
	}
	sort.Strings(retried)
	sort.Strings(labels)
	assert.Equal(t, labels, retried, "every task that did not complete is retried: the 3 aborted and the 9 never started")
}
