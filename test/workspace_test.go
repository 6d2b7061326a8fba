package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestWorkspacesAcrossHosts runs two worker processes, each serving its own host-local
// workspace root: a run (spawn, then sdk) whose cwd lies under a root executes every
// workflow task and activity on that root's worker, and a cwd that neither serves is
// rejected before anything starts, by the client and by `starter run` (exit 2).
func TestWorkspacesAcrossHosts(t *testing.T) {
	f, h := startTwoHosts(t)
	rootA, rootB, cwdA, cwdB, wA, wB := h[0].root, h[1].root, h[0].cwd, h[1].cwd, h[0].w, h[1].w

	for _, tc := range []struct {
		provider, cwd string
		w             *workerProc
	}{
		{subagent.ProviderSpawn, cwdA, wA},
		{subagent.ProviderSpawn, cwdB, wB},
		{subagent.ProviderSDK, cwdA, wA},
		{subagent.ProviderSDK, cwdB, wB},
	} {
		_, run := f.start(rootInput(tc.provider, tc.cwd, script(t, tc.cwd, `{"text": "ok"}`), "answer"))
		out, cancelled := outcome(t, run)
		require.False(t, cancelled)
		require.Equal(t, []session.Block{session.Text("ok")}, out.Result.Output, "%s run in %s", tc.provider, tc.cwd)
		requireRanOn(t, f, run, tc.w, fmt.Sprintf("%s run in %s", tc.provider, tc.cwd))
	}

	nobody := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, _, err := subflow.Start(ctx, f.c, subflow.StartOptions{TaskQueue: f.taskQueue,
		Input: rootInput(subagent.ProviderSpawn, nobody, script(t, nobody, `{"text": "ok"}`), "answer")})
	var ve *subagent.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, subflow.RuleWorkspace, ve.Rule)
	for _, s := range []string{nobody, "local:" + rootA, "local:" + rootB} {
		require.Contains(t, ve.Message, s)
	}

	code, _, stderr := runStarter(t, nobody, "run", "--task-queue", f.taskQueue, "--model-provider", "scripted",
		"--model", script(t, nobody, `{"text": "ok"}`), "answer")
	require.Equal(t, 2, code, "stderr: %s", stderr)
	require.Contains(t, stderr, "no worker serves the cwd "+nobody)
}

// TestWorkspacesBatchAcrossHosts: a batch whose tasks have cwds under two workers'
// different host-local roots starts each child on the worker whose root holds its cwd, and
// a batch with a task whose cwd neither serves is rejected before anything starts (exit 2,
// naming the line and the cwd).
func TestWorkspacesBatchAcrossHosts(t *testing.T) {
	f, h := startTwoHosts(t)
	cwdA, cwdB, wA, wB := h[0].cwd, h[1].cwd, h[0].w, h[1].w

	workers := map[string]*workerProc{cwdA: wA, cwdB: wB}
	answers := map[string]string{cwdA: script(t, cwdA, `{"text": "ok"}`), cwdB: script(t, cwdB, `{"text": "ok"}`)}
	var tasks []workflows.Task
	for i, cwd := range []string{cwdA, cwdB, cwdA, cwdB} {
		task := scriptedTask(subagent.ProviderSpawn, cwd, answers[cwd], "answer")
		task.Label = fmt.Sprintf("t%d", i)
		tasks = append(tasks, task)
	}
	starterDir := t.TempDir()
	code, stdout, stderr := runStarter(t, starterDir, "batch", "--detach", "--task-queue", f.taskQueue,
		writeTaskFile(t, starterDir, tasks))
	require.Equal(t, 0, code, "stderr: %s", stderr)
	batchID := strings.TrimSpace(stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	batch := f.c.GetWorkflow(ctx, batchID, "")
	var sum workflows.BatchSummary
	require.NoError(t, batch.Get(ctx, &sum))
	require.True(t, sum.Completed(), "%+v", sum)
	record(t, batch, "batch-routed")

	code, stdout, stderr = runStarter(t, t.TempDir(), "batch", "results", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	results := parseResults(t, stdout)
	require.Len(t, results, len(tasks))
	for i, task := range tasks {
		r := results[i]
		require.Equal(t, "ok", r.Output, "task %d", i)
		run := f.c.GetWorkflow(ctx, r.WorkflowID, "")
		requireRanOn(t, f, run, workers[task.Cwd], fmt.Sprintf("task %d in %s", i, task.Cwd))
	}

	nobody := t.TempDir()
	bad := append(tasks[:1:1], scriptedTask(subagent.ProviderSpawn, nobody, script(t, nobody, `{"text": "ok"}`), "answer"))
	tasksFile := writeTaskFile(t, starterDir, bad)
	code, _, stderr = runStarter(t, starterDir, "batch", "--detach", "--task-queue", f.taskQueue, tasksFile)
	require.Equal(t, 2, code, "stderr: %s", stderr)
	require.Contains(t, stderr, tasksFile+":2: no worker serves the cwd "+nobody)
	require.NotContains(t, stderr, tasksFile+":1:", "the served task is fine")
}

// host is one worker process of startTwoHosts, serving root host-locally, and cwd a
// directory under root.
type host struct {
	root, cwd string
	w         *workerProc
}

// startTwoHosts starts two worker processes, each serving its own host-local workspace root
// (ws-a, ws-b) with a project directory under it, and waits until both poll.
func startTwoHosts(t *testing.T) (*faultEnv, [2]host) {
	f := newFaultEnv(t, "")
	var hs [2]host
	for i, name := range []string{"ws-a", "ws-b"} {
		root := filepath.Join(t.TempDir(), name)
		cwd := filepath.Join(root, "proj")
		require.NoError(t, os.MkdirAll(cwd, 0o755))
		hs[i] = host{root: root, cwd: cwd, w: f.startWorker("--workspace-root", "local:"+root)}
	}
	waitPollers(t, f, hs[0].w, hs[1].w)
	return f, hs
}

// requireRanOn checks that every workflow task and activity of run ran on the worker w, and
// that the run ran at least one activity.
func requireRanOn(t *testing.T, f *faultEnv, run client.WorkflowRun, w *workerProc, what string) {
	t.Helper()
	want := fmt.Sprintf("%d@", w.pid())
	var activities int
	for _, e := range history(t, f.c, run) {
		var identity string
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			activities++
			identity = e.GetActivityTaskStartedEventAttributes().GetIdentity()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			identity = e.GetWorkflowTaskStartedEventAttributes().GetIdentity()
		default:
			continue
		}
		require.True(t, strings.HasPrefix(identity, want),
			"%s: event %d ran on %q, want the worker %s serving its root", what, e.GetEventId(), identity, want)
	}
	require.NotZero(t, activities, "%s ran no activity", what)
}

// waitPollers waits until the workers poll the test's common task queue, where starters
// read the roots they serve.
func waitPollers(t *testing.T, f *faultEnv, ws ...*workerProc) {
	t.Helper()
	require.Eventually(t, func() bool {
		desc, err := f.c.DescribeTaskQueue(context.Background(), f.taskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			return false
		}
		for _, w := range ws {
			found := false
			for _, p := range desc.GetPollers() {
				found = found || strings.HasPrefix(p.GetIdentity(), fmt.Sprintf("%d@", w.pid()))
			}
			if !found {
				return false
			}
		}
		return true
	}, 2*waitLimit, waitTick, "workers never polled %s", f.taskQueue)
}
