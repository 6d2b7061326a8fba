package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/workflows"
)

// TestWorkerKillRecovery kills, SIGKILL, the worker holding a run's drive while its one model
// answer streams, several times (SUBFLOW_TEST_CLUSTER_KILLS, else 5), restarting it after
// each, and logs kill → result less the redone answer (p50 and the maximum) as
// docs/benchmarks.md reports it for the deployed shape. Every run must complete, its answer
// whole, on the other worker.
func TestWorkerKillRecovery(t *testing.T) {
	needCluster(t)
	kills := 5
	if v := os.Getenv("SUBFLOW_TEST_CLUSTER_KILLS"); v != "" {
		var err error
		kills, err = strconv.Atoi(v)
		require.NoError(t, err, "SUBFLOW_TEST_CLUSTER_KILLS")
	}
	const answer = 3 * time.Second
	dir := t.TempDir()
	text := strings.Repeat("recovered answer ", 20)
	path := script(t, dir, fmt.Sprintf(`{"text": %q, "chunks": 40, "delayMs": %d}`, text, answer.Milliseconds()))
	var took []time.Duration
	for i := range kills {
		id := "recovery-" + uuid.NewString()
		code, _, stderr := starter(t, dir, "run", "--detach", "--id", id, "--cwd", dir,
			"--model-provider", "scripted", "--model", path, "answer slowly")
		require.Equal(t, 0, code, "stderr: %s", stderr)
		victim := driveWorker(t, id)
		clusterCmd(t, "kill", victim)
		killed := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		err := env.c.GetWorkflow(ctx, id, "").Get(ctx, nil)
		cancel()
		took = append(took, time.Since(killed)-answer)
		require.NoError(t, err, "kill %d: run %s", i, id)
		code, stdout, stderr := starter(t, dir, "result", "--json", id)
		require.Equal(t, 0, code, "stderr: %s", stderr)
		assert.Contains(t, stdout, `"stopReason":"completed"`)
		assert.Contains(t, stdout, strings.TrimSpace(text))
		clusterCmd(t, "start", victim)
	}
	slices.Sort(took)
	t.Logf("worker kill → result less the %v answer over %d kills: p50 %v, max %v (all: %v)",
		answer, kills, took[len(took)/2].Round(10*time.Millisecond), took[len(took)-1].Round(10*time.Millisecond), took)
}

// driveWorker waits until run id's drive is running and has streamed part of its answer, and
// returns the name of the cluster worker (worker-1 or worker-2) that holds it: the SDK's
// default identity is PID@HOST.
func driveWorker(t *testing.T, id string) string {
	t.Helper()
	pids := map[string]string{}
	for _, name := range []string{"worker-1", "worker-2"} {
		pids[clusterCmd(t, "pid", name)] = name
	}
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		d, err := env.c.DescribeWorkflowExecution(context.Background(), id, "")
		if err == nil {
			for _, a := range d.GetPendingActivities() {
				if a.GetActivityType().GetName() != workflows.ActivityDrive || a.GetHeartbeatDetails() == nil {
					continue
				}
				pid, _, _ := strings.Cut(a.GetLastWorkerIdentity(), "@")
				name, ok := pids[pid]
				require.True(t, ok, "run %s: drive held by %q, not a cluster worker (%v)", id, a.GetLastWorkerIdentity(), pids)
				return name
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s: no running drive after %v", id, waitLimit)
	return ""
}
