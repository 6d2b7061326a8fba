package cluster

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/workflows"
)

// faultTasks is the size of each fault test's batch: SUBFLOW_TEST_CLUSTER_FAULT_TASKS, else
// 500.
func faultTasks(t *testing.T) int {
	if v := os.Getenv("SUBFLOW_TEST_CLUSTER_FAULT_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "SUBFLOW_TEST_CLUSTER_FAULT_TASKS")
		return n
	}
	return 500
}

// faultRun runs a batch of tasks that each stream for a while, applies fault once a tenth
// of them are done, and logs the time from the fault to the batch's next finished task. heal
// (when not nil) runs once the batch moves again, or after a minute without progress. The
// batch must then end with every task completed exactly once, each with its own answer:
// nothing lost, nothing run twice into a second result.
func faultRun(t *testing.T, name string, fault, heal func()) {
	needCluster(t)
	dir := t.TempDir()
	slow := script(t, dir, `{"text": "fine", "chunks": 4, "delayMs": 150}`)
	n := faultTasks(t)
	code, stdout, stderr := starter(t, dir, "batch", "--concurrency", "50", "--detach", writeTasks(t, dir, slow, n))
	require.Equal(t, 0, code, "stderr: %s", stderr)
	batchID := strings.TrimSpace(stdout)
	t.Cleanup(func() {
		if t.Failed() {
			_ = env.c.TerminateWorkflow(context.Background(), batchID, "", "fault test failed")
		}
	})

	doneAt := waitProgress(t, batchID, -1, n/10)
	begin := time.Now()
	fault()
	moved := waitProgress(t, batchID, doneAt, doneAt+1)
	took := time.Since(begin)
	if heal != nil {
		heal()
	}
	t.Logf("fault %s: the batch of %d tasks moved again %v after the fault (%d done then, %d after)", name, n, took.Round(100*time.Millisecond), doneAt, moved)
	sum := waitBatch(t, batchID)
	require.True(t, sum.Completed(), "%+v", sum)
	requireAllCompleted(t, dir, batchID, n, "fine")
}

// waitProgress polls the batch's progress until at least want tasks are done and returns
// the count; errors (the fault itself) are waited out. from is the count at the fault, -1
// before it. A batch that does not move for waitLimit fails the test.
func waitProgress(t *testing.T, batchID string, from, want int) int {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, err := env.c.QueryWorkflow(ctx, batchID, "", workflows.QueryProgress)
		var s workflows.BatchSummary
		if err == nil {
			err = v.Get(&s)
		}
		cancel()
		if err == nil && s.Done >= want {
			return s.Done
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("batch %s: fewer than %d tasks done after %v (from %d)", batchID, want, waitLimit, from)
	return 0
}

// TestFaultHistoryHostKilled: kill -9 one of the two history hosts mid-batch; its shards
// move to the other.
func TestFaultHistoryHostKilled(t *testing.T) {
	faultRun(t, "kill -9 history-1",
		func() { clusterCmd(t, "kill", "history-1") },
		func() { clusterCmd(t, "start", "history-1") })
}

// TestFaultMatchingRestarted: matching restarts mid-batch; its polls are dropped.
func TestFaultMatchingRestarted(t *testing.T) {
	faultRun(t, "restart matching", func() { clusterCmd(t, "stop", "matching"); clusterCmd(t, "start", "matching") }, nil)
}

// TestFaultFrontendRestarted: the frontend restarts mid-batch; workers and the client
// reconnect.
func TestFaultFrontendRestarted(t *testing.T) {
	faultRun(t, "restart frontend", func() { clusterCmd(t, "stop", "frontend"); clusterCmd(t, "start", "frontend") }, nil)
}

// TestFaultPostgresRestarted: PostgreSQL restarts mid-batch: Temporal and the session store
// both lose their connections.
func TestFaultPostgresRestarted(t *testing.T) {
	faultRun(t, "restart PostgreSQL", func() { clusterCmd(t, "stop", "postgres"); clusterCmd(t, "start", "postgres") }, nil)
}

// TestFaultWorkerKilled: kill -9 a subflow worker mid-drive; the other worker resumes its
// drives from the shared session store.
func TestFaultWorkerKilled(t *testing.T) {
	faultRun(t, "kill -9 worker-1",
		func() { clusterCmd(t, "kill", "worker-1") },
		func() { clusterCmd(t, "start", "worker-1") })
}

// TestFaultWorkerStopped: a worker is stopped (SIGSTOP) for longer than the heartbeat
// timeout, then continued: its drives went to the other worker, and its late writes are
// refused (fencing), so each task still ends once.
func TestFaultWorkerStopped(t *testing.T) {
	faultRun(t, "SIGSTOP worker-1 for 15s",
		func() { clusterCmd(t, "signal", "STOP", "worker-1") },
		func() {
			time.Sleep(15 * time.Second)
			clusterCmd(t, "signal", "CONT", "worker-1")
		})
}
