package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/workflows"
)

// deploymentName is the Worker Deployment the cluster's workers join (cluster.sh).
func deploymentName() string {
	if d := os.Getenv("SUBFLOW_DEPLOYMENT_NAME"); d != "" {
		return d
	}
	return "subflow"
}

// clusterBuild is the build id cluster.sh started worker-1 with.
func clusterBuild(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.dir, "run", "worker-1.build"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// startBuild starts a worker process of the cluster's worker binary as build buildID, beside
// cluster.sh's workers, and returns its stop function (SIGTERM, then wait).
func startBuild(t *testing.T, buildID string, i int) func() {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.dir, "bin", "subflow-worker"))
	cmd.Env = append(os.Environ(), "SUBFLOW_DEPLOYMENT_NAME="+deploymentName(), "SUBFLOW_BUILD_ID="+buildID)
	logFile, err := os.Create(filepath.Join(env.dir, "log", fmt.Sprintf("upgrade-worker-%d.log", i)))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		_ = logFile.Close()
	}
	t.Cleanup(stop)
	return stop
}

// waitLane waits until the interactive lane of the cluster's queue is as ok says (what).
func waitLane(t *testing.T, what string, ok func(subflow.QueueVersions) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		q, err := subflow.ReadQueueVersions(context.Background(), env.c, workflows.InteractiveQueue(workflows.TaskQueue))
		return err == nil && ok(q)
	}, 2*time.Minute, 200*time.Millisecond, "the interactive lane: %s", what)
}

// interactiveRun runs `starter run` to completion and returns the build that ran it, after
// checking that it ran on the interactive lane of the cluster's queue.
func interactiveRun(t *testing.T, dir string) string {
	t.Helper()
	code, stdout, stderr := starter(t, dir, "run", "--json", "--cwd", dir, "--model-provider", model.ProviderScripted,
		"--model", script(t, dir, `{"text": "on time"}`), "answer during the upgrade")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var res struct {
		WorkflowID string `json:"workflowId"`
		Output     string `json:"output"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), "stdout: %s", stdout)
	assert.Equal(t, "on time", res.Output)
	desc, err := env.c.DescribeWorkflowExecution(context.Background(), res.WorkflowID, "")
	require.NoError(t, err)
	assert.Equal(t, workflows.InteractiveQueue(workflows.TaskQueue), desc.GetExecutionConfig().GetTaskQueue().GetName())
	return lastRunBuild(t, res.WorkflowID)
}

// lastRunBuild is the build that completed the last workflow task of workflowID's latest run.
func lastRunBuild(t *testing.T, workflowID string) string {
	t.Helper()
	iter := env.c.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	build := ""
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		if done := ev.GetWorkflowTaskCompletedEventAttributes(); done != nil {
			build = done.GetDeploymentVersion().GetBuildId()
		}
	}
	return build
}

// TestRollingUpgradeUnderLoad rolls the cluster's workers to a new build while a batch runs,
// by the procedure of docs/deployment.md: once half the batch is done, workers of a new
// build start beside the old ones, `starter deployment set-current` makes it current, the
// batch moves to it at its next continue-as-new, the old build drains and its workers stop.
// Every task completes once, and no drive ran twice (so no tool call ran twice): each
// child's Drive started once. Afterwards the cluster is rolled back to its own build.
func TestRollingUpgradeUnderLoad(t *testing.T) {
	needCluster(t)
	dir := t.TempDir()
	deployment, old := deploymentName(), clusterBuild(t)
	next := old + "-next"
	// Each task lists its directory (a tool call) and then answers in chunks.
	answer := script(t, dir, `{"toolCalls": [{"name": "list_dir", "input": {}}], "delayMs": 200}`,
		`{"text": "fine", "chunks": 3, "delayMs": 200}`)
	const n = 300
	code, stdout, stderr := starter(t, dir, "batch", "--concurrency", "20", "--continue-as-new-after", "50", "--detach",
		writeTasks(t, dir, answer, n))
	require.Equal(t, 0, code, "stderr: %s", stderr)
	batchID := strings.TrimSpace(stdout)
	t.Cleanup(func() {
		if t.Failed() {
			_ = env.c.TerminateWorkflow(context.Background(), batchID, "", "upgrade test failed")
		}
	})
	waitProgress(t, batchID, -1, n/2)

	// The new build's workers poll beside the old ones; then it becomes current. A person's
	// run started in between runs on the old build, still current, on the queue's
	// interactive lane, which both builds poll.
	startBuild(t, next, 1)
	startBuild(t, next, 2)
	next1 := worker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: next}
	waitLane(t, "build "+next+" polls it", func(q subflow.QueueVersions) bool { return q.Polled(&next1) })
	assert.Equal(t, old, interactiveRun(t, dir), "a run started before the switch ran on the old build")
	var out string
	require.Eventually(t, func() bool {
		code, out, stderr = starter(t, dir, "deployment", "set-current", deployment, next)
		out += stderr
		return code == 0
	}, 2*time.Minute, time.Second, "set-current %s: %s", next, out)
	t.Cleanup(func() {
		// Back to the cluster's own build for the tests after this one: its workers start
		// again and it becomes current (the new build's workers stop at the test's end).
		clusterCmd(t, "start", "worker-1", "worker-2")
		require.Eventually(t, func() bool {
			code, _, _ := starter(t, dir, "deployment", "set-current", deployment, old)
			return code == 0
		}, 2*time.Minute, time.Second, "roll back to %s", old)
	})

	waitLane(t, "it routes to build "+next, func(q subflow.QueueVersions) bool {
		return q.Current != nil && *q.Current == next1 && q.Served()
	})
	assert.Equal(t, next, interactiveRun(t, dir), "a run started after the switch ran on the new build")

	sum := waitBatch(t, batchID)
	require.True(t, sum.Completed(), "%+v", sum)
	requireAllCompleted(t, dir, batchID, n, "fine")
	assert.Equal(t, next, lastRunBuild(t, batchID), "the batch's last run ran on the new build")

	// The old build drains (its runs, started before the switch, end there) and stops.
	code, stdout, stderr = starter(t, dir, "deployment", "wait-drained", deployment, old, "--timeout", "5m")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	clusterCmd(t, "stop", "worker-1", "worker-2")

	// No drive ran twice: each child's Drive activity started once, on one build.
	ctx := context.Background()
	var token []byte
	children, onNew := 0, 0
	for {
		resp, err := env.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("SubagentBatch = %q AND WorkflowType = %q", batchID, workflows.WorkflowName), NextPageToken: token})
		require.NoError(t, err)
		for _, info := range resp.GetExecutions() {
			children++
			drives, build := 0, ""
			iter := env.c.GetWorkflowHistory(ctx, info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for iter.HasNext() {
				ev, err := iter.Next()
				require.NoError(t, err)
				if s := ev.GetActivityTaskStartedEventAttributes(); s != nil {
					assert.Equal(t, int32(1), s.GetAttempt(), "child %s: an activity started again", info.GetExecution().GetWorkflowId())
				}
				if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == workflows.ActivityDrive {
					drives++
				}
				if done := ev.GetWorkflowTaskCompletedEventAttributes(); done != nil && build == "" {
					build = done.GetDeploymentVersion().GetBuildId()
				}
			}
			if build == next {
				onNew++
			}
			assert.Equal(t, 1, drives, "child %s: one drive", info.GetExecution().GetWorkflowId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	assert.Equal(t, n, children)
	assert.Positive(t, onNew, "tasks started after the switch ran on the new build")
	assert.Less(t, onNew, n, "tasks started before it ran on the old build")
	t.Logf("rolling upgrade: %d of %d tasks ran on the new build %s, the batch used %d runs", onNew, n, next, sum.Runs)
}
