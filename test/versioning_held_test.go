package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// unpolledVersion makes a version of deployment whose workers are gone: a worker of buildID
// polls queue (the server knows a version once one of its workers polled) and stops, and
// the queue no longer counts it as polling.
func unpolledVersion(t *testing.T, deployment, buildID, queue string) {
	t.Helper()
	stop := deployedWorker(t, deployment, buildID, queue, nil)
	h := env.c.WorkerDeploymentClient().GetHandle(deployment)
	v := worker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: buildID}
	// The version knows its queues a moment after its first poll: the workflow and activity
	// types of queue and of its interactive lane.
	require.Eventually(t, func() bool {
		d, err := h.DescribeVersion(context.Background(), client.WorkerDeploymentDescribeVersionOptions{BuildID: buildID})
		return err == nil && len(d.Info.TaskQueuesInfos) == 4
	}, waitLimit, 50*time.Millisecond, "build %s polls %s and its lane", buildID, queue)
	stop()
	require.Eventually(t, func() bool {
		q, err := subflow.ReadQueueVersions(context.Background(), env.c, queue)
		return err == nil && !q.Polled(&v)
	}, waitLimit, 100*time.Millisecond, "the stopped workers of build %s no longer poll %s", buildID, queue)
}

// TestBatchHeldOnItsBuild switches a running batch's deployment to a build with no
// workers: `starter deployment set-current` refuses without --force, naming the build; with
// it, the batch stays on its build and goes on there, says so in its progress, its Current
// Details and `starter status`; once the build's workers come, it moves there at its next
// continue-as-new and completes every task, with at most one run more than its threshold
// makes (no loop, no stall).
func TestBatchHeldOnItsBuild(t *testing.T) {
	deployment := "held-" + uuid.NewString()[:8]
	queue := "held-" + uuid.NewString()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()

	deployedWorker(t, deployment, "a", queue, nil)
	setCurrent(t, deployment, "a")
	unpolledVersion(t, deployment, "b", queue)

	const n, threshold = 12, 3
	slow := script(t, dir, `{"delayMs": 1000, "text": "done"}`)
	var tasks []workflows.Task
	for i := range n {
		tasks = append(tasks, scriptedTask(subagent.ProviderSpawn, dir, slow, fmt.Sprintf("task %d", i)))
	}
	batchID := "held-batch-" + uuid.NewString()
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: queue}, workflows.BatchWorkflowName,
		workflows.BatchInput{BatchID: batchID, Tasks: tasks, Total: n, Concurrency: 2, ContinueAsNewAfter: threshold})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		sum, err := subflow.BatchSummaryOf(ctx, env.c, batchID)
		return err == nil && sum.Done >= 2
	}, waitLimit, 50*time.Millisecond, "the batch runs on build a")

	code, stdout, stderr := runStarter(t, dir, "deployment", "set-current", deployment, "b")
	assert.Equal(t, 1, code, "stdout: %s", stdout)
	assert.Contains(t, stderr, "no worker of "+deployment+":b has polled its task queues ("+queue+", "+workflows.InteractiveQueue(queue)+")")
	assert.Contains(t, stderr, "--force")
	desc, err := env.c.WorkerDeploymentClient().GetHandle(deployment).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	require.NoError(t, err)
	assert.Equal(t, "a", desc.Info.RoutingConfig.CurrentVersion.BuildID, "refused: a stays current")
	code, stdout, stderr = runStarter(t, dir, "deployment", "set-current", "--force", deployment, "b")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, deployment+":b is the current version")

	// Each run of the batch, still on a, finds b without workers (its first look at b comes
	// with its first workflow task after the switch) and says so.
	var held workflows.BatchSummary
	var details string
	var lastErr error
	require.Eventually(t, func() bool {
		held, lastErr = subflow.BatchSummaryOf(ctx, env.c, batchID)
		v, err := env.c.QueryWorkflow(ctx, batchID, "", "__temporal_workflow_metadata")
		var meta sdkpb.WorkflowMetadata
		if err == nil && v.Get(&meta) == nil {
			details = meta.GetCurrentDetails()
		}
		return held.BuildHeld != "" && details != ""
	}, waitLimit, 20*time.Millisecond, "the batch says it stays on its build: %+v (error %v), details %q", held, lastErr, details)
	assert.Contains(t, held.BuildHeld, "stays on build a: the current version "+deployment+":b has no worker polling task queue "+queue, "%+v", held)
	assert.Contains(t, details, "stays on build a")
	code, stdout, stderr = runStarter(t, dir, "status", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "\nbuild     stays on build a")

	// b's workers come: the next run of the batch finds them and moves there, once.
	deployedWorker(t, deployment, "b", queue, nil)
	var sum workflows.BatchSummary
	require.NoError(t, run.Get(ctx, &sum), "the batch completes")
	assert.Equal(t, n, sum.ByStopReason[subagent.StopCompleted], "%+v", sum)
	chain := buildChain(t, batchID)
	assert.Equal(t, []string{"a", "b"}, slices.Compact(chain), "the batch stayed on a while b had no workers, then moved to b")
	// Its runs are those its threshold makes (one per `threshold` starts, the last awaiting
	// the last children) and the one move: the switch to a build without workers added none.
	assert.Len(t, chain, sum.Runs)
	assert.LessOrEqual(t, sum.Runs, (n+threshold-1)/threshold+1, "continue-as-new runs are bounded: %+v", sum)
	assert.Empty(t, sum.BuildHeld, "on the current build, nothing holds the batch")
}

// TestBatchStatusWithoutWorkers asks for the progress of a batch no worker of whose build
// polls: `starter batch status --json` answers at once instead of waiting for a worker,
// counts the tasks done and running from the batch's children in visibility (its run started
// with none; a run that only names the batch is not counted), and says why.
func TestBatchStatusWithoutWorkers(t *testing.T) {
	deployment := "gone-" + uuid.NewString()[:8]
	queue := "gone-" + uuid.NewString()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	stop := deployedWorker(t, deployment, "a", queue, nil)
	setCurrent(t, deployment, "a")
	quick := script(t, dir, `{"text": "done"}`)
	slow := script(t, dir, `{"delayMs": 60000, "text": "never read"}`)
	batchID := "gone-batch-" + uuid.NewString()
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: queue}, workflows.BatchWorkflowName,
		workflows.BatchInput{BatchID: batchID, Tasks: []workflows.Task{
			scriptedTask(subagent.ProviderSpawn, dir, quick, "one"),
			scriptedTask(subagent.ProviderSpawn, dir, slow, "two"), scriptedTask(subagent.ProviderSpawn, dir, slow, "three"),
		}, Total: 3, Concurrency: 1})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		sum, err := subflow.BatchSummaryOf(ctx, env.c, batchID)
		return err == nil && sum.Done == 1 && sum.Running == 1
	}, waitLimit, 50*time.Millisecond, "the batch finishes its first task and starts its second")
	// A run that names the batch without being its child is not one of its tasks.
	stray := rootInput(subagent.ProviderSpawn, dir, quick, "not a task")
	stray.Batch = batchID
	_, strayRun := start(t, stray)
	require.NoError(t, strayRun.Get(ctx, nil))
	// Visibility records runs a moment after they start and close.
	count := func(q string) int64 {
		resp, err := env.c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Query: fmt.Sprintf("SubagentBatch = %q AND %s", batchID, q)})
		if err != nil {
			return -1
		}
		return resp.GetCount()
	}
	require.Eventually(t, func() bool {
		return count("ExecutionStatus = 'Running'") == 1 && count("ExecutionStatus != 'Running'") == 2
	}, waitLimit, 50*time.Millisecond, "visibility lists the batch's children and the stray run")
	stop()
	defer func() { _ = env.c.TerminateWorkflow(context.Background(), run.GetID(), "", "test over") }()

	code, stdout, stderr := runStarter(t, dir, "batch", "status", "--json", batchID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var sum workflows.BatchSummary
	require.NoError(t, json.Unmarshal([]byte(stdout), &sum), stdout)
	assert.Equal(t, 3, sum.Total)
	assert.Equal(t, 1, sum.Runs)
	assert.Equal(t, []int{1, 1, 1}, []int{sum.Done, sum.Running, sum.Queued}, "done, running, queued: %+v", sum)
	assert.Contains(t, sum.Unanswered, "did not answer")
	assert.Contains(t, sum.Unanswered, "counted from its children in visibility")
	assert.Contains(t, sum.Unanswered, "build "+deployment+":a (pinned)")
}

// TestWorkerSaysItGetsNoRuns starts workers that the task queue's routing gives no runs:
// an unversioned worker on a queue with a current version, and a build that is neither
// current nor ramping nor draining; each warns at start naming the queue and the current
// version. A worker of the current build does not, even right after its build was made
// current, nor one that makes its build current (--make-current), which it does.
func TestWorkerSaysItGetsNoRuns(t *testing.T) {
	deployment := "idle-" + uuid.NewString()[:8]
	queue := "idle-" + uuid.NewString()
	deployedWorker(t, deployment, "a", queue, nil)
	setCurrent(t, deployment, "a")
	// The deployment's routing reaches the task queue a moment after SetCurrentVersion
	// returns, and a worker reads the queue once at start.
	require.Eventually(t, func() bool {
		q, err := subflow.ReadQueueVersions(context.Background(), env.c, queue)
		return err == nil && q.Current != nil && *q.Current == worker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: "a"}
	}, waitLimit, 50*time.Millisecond, "the queue routes to build a")

	warnings := func(deploymentName, buildID string) []string {
		core, logs := observer.New(zapcore.WarnLevel)
		w, cleanup, err := app.New(env.c, app.Options{
			TaskQueue: queue, SessionRoot: env.sessionRoot, Logger: zap.New(core),
			DeploymentName: deploymentName, BuildID: buildID,
		})
		require.NoError(t, err)
		w.Stop()
		require.NoError(t, cleanup())
		var lines []string
		for _, e := range logs.All() {
			ctx := e.ContextMap()
			lines = append(lines, fmt.Sprintf("%s taskQueue=%v currentVersion=%v", e.Message, ctx["taskQueue"], ctx["currentVersion"]))
		}
		return lines
	}
	current := fmt.Sprintf("taskQueue=%s currentVersion=%s:a", queue, deployment)
	unversioned := strings.Join(warnings("", ""), "\n")
	assert.Contains(t, unversioned, "this unversioned worker receives no new runs")
	assert.Contains(t, unversioned, current)
	idle := strings.Join(warnings(deployment, "c"), "\n")
	assert.Contains(t, idle, "this build receives no runs: it is neither current nor ramping nor draining")
	assert.Contains(t, idle, "starter deployment set-current "+deployment+" c")
	assert.Contains(t, idle, current)
	assert.Empty(t, warnings(deployment, "a"), "the current build serves runs")
	// A build made current a moment ago serves runs though its queue may not say so yet.
	deployedWorker(t, deployment, "e", queue, nil)
	setCurrent(t, deployment, "e")
	assert.Empty(t, warnings(deployment, "e"), "a build just made current serves runs")

	// A worker told to make its build current (compose's one build at a time) does so once
	// it polls, without a warning.
	core, logs := observer.New(zapcore.WarnLevel)
	w, cleanup, err := app.New(env.c, app.Options{
		TaskQueue: queue, SessionRoot: env.sessionRoot, Logger: zap.New(core),
		DeploymentName: deployment, BuildID: "d", MakeCurrent: true,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	defer func() { w.Stop(); _ = cleanup() }()
	h := env.c.WorkerDeploymentClient().GetHandle(deployment)
	require.Eventually(t, func() bool {
		d, err := h.Describe(context.Background(), client.WorkerDeploymentDescribeOptions{})
		return err == nil && d.Info.RoutingConfig.CurrentVersion != nil && d.Info.RoutingConfig.CurrentVersion.BuildID == "d"
	}, waitLimit, 50*time.Millisecond, "build d made itself current")
	assert.Empty(t, logs.All())
}

// onlyStartSubagent registers StartSubagent alone: a build that cannot run a batch.
func onlyStartSubagent(r worker.WorkflowRegistry) {
	workflows.Register(onlyStart{r})
}

type onlyStart struct{ worker.WorkflowRegistry }

func (o onlyStart) RegisterWorkflowWithOptions(w any, opts workflow.RegisterOptions) {
	if opts.Name == workflows.WorkflowName {
		o.WorkflowRegistry.RegisterWorkflowWithOptions(w, opts)
	}
}

// TestBatchHeldOffABuildWithoutIt makes current a build whose workers poll the batch's queue
// but do not register the batch workflow (they say so in their version's metadata): the
// batch stays on its build, saying why, and completes there.
func TestBatchHeldOffABuildWithoutIt(t *testing.T) {
	deployment := "noreg-" + uuid.NewString()[:8]
	queue := "noreg-" + uuid.NewString()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	deployedWorker(t, deployment, "a", queue, nil)
	setCurrent(t, deployment, "a")
	deployedWorker(t, deployment, "b", queue, onlyStartSubagent)
	v := worker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: "b"}
	require.Eventually(t, func() bool {
		types, ok, err := subflow.RegisteredWorkflows(ctx, env.c, v)
		return err == nil && ok && slices.Equal(types, []string{workflows.WorkflowName})
	}, waitLimit, 50*time.Millisecond, "build b states the workflows it registers")

	const n, threshold = 6, 2
	slow := script(t, dir, `{"delayMs": 700, "text": "done"}`)
	var tasks []workflows.Task
	for i := range n {
		tasks = append(tasks, scriptedTask(subagent.ProviderSpawn, dir, slow, fmt.Sprintf("task %d", i)))
	}
	batchID := "noreg-batch-" + uuid.NewString()
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: queue}, workflows.BatchWorkflowName,
		workflows.BatchInput{BatchID: batchID, Tasks: tasks, Total: n, Concurrency: 2, ContinueAsNewAfter: threshold})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		sum, err := subflow.BatchSummaryOf(ctx, env.c, batchID)
		return err == nil && sum.Running > 0
	}, waitLimit, 50*time.Millisecond, "the batch runs on build a")
	setCurrent(t, deployment, "b")

	var held workflows.BatchSummary
	require.Eventually(t, func() bool {
		held, err = subflow.BatchSummaryOf(ctx, env.c, batchID)
		return err == nil && (held.BuildHeld != "" || held.Done == n)
	}, waitLimit, 20*time.Millisecond, "the batch says it stays on its build")
	assert.Contains(t, held.BuildHeld, "stays on build a: the current version "+deployment+":b does not register workflow type "+workflows.BatchWorkflowName)
	var sum workflows.BatchSummary
	require.NoError(t, run.Get(ctx, &sum), "the batch completes on build a")
	assert.Equal(t, n, sum.ByStopReason[subagent.StopCompleted], "%+v", sum)
	assert.Equal(t, []string{"a"}, slices.Compact(buildChain(t, batchID)))
	assert.LessOrEqual(t, sum.Runs, (n+threshold-1)/threshold, "no run more than the threshold makes: %+v", sum)
}
