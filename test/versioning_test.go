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
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// startSubagentB is build B's StartSubagent: the shipped workflow after one more command (a
// side effect) at the start, so no history of build A replays on it.
func startSubagentB(ctx workflow.Context, in workflows.StartInput) (workflows.Outcome, error) {
	var b string
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return "b" }).Get(&b); err != nil {
		return workflows.Outcome{}, err
	}
	return workflows.StartSubagent(ctx, in)
}

// registerB registers build B: every workflow of workflows.Register, StartSubagent swapped
// for startSubagentB under the same name and options.
func registerB(r worker.WorkflowRegistry) { workflows.Register(swapStart{r}) }

type swapStart struct{ worker.WorkflowRegistry }

func (s swapStart) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	if o.Name == workflows.WorkflowName {
		w = startSubagentB
	}
	s.WorkflowRegistry.RegisterWorkflowWithOptions(w, o)
}

// deployedWorker starts a worker of build buildID in deployment on queue, registering its
// workflows with register (nil: the shipped ones). Stop is idempotent.
func deployedWorker(t *testing.T, deployment, buildID, queue string, register func(worker.WorkflowRegistry)) (stop func()) {
	t.Helper()
	w, cleanup, err := app.New(env.c, app.Options{
		TaskQueue: queue, SessionRoot: env.sessionRoot, Logger: zap.NewNop(),
		DeploymentName: deployment, BuildID: buildID, Workflows: register,
	})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			w.Stop()
			_ = cleanup()
		}
	}
	t.Cleanup(stop)
	return stop
}

// setCurrent makes buildID the current version of deployment once its workers polled.
func setCurrent(t *testing.T, deployment, buildID string) {
	t.Helper()
	h := env.c.WorkerDeploymentClient().GetHandle(deployment)
	var err error
	require.Eventually(t, func() bool {
		_, err = h.SetCurrentVersion(context.Background(), client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID})
		return err == nil
	}, waitLimit, 100*time.Millisecond, "set %s current: %v", buildID, err)
}

// runHistory reads a run's full history.
func runHistory(t *testing.T, workflowID, runID string) []*historypb.HistoryEvent {
	t.Helper()
	var evs []*historypb.HistoryEvent
	iter := env.c.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	return evs
}

// taskBuilds are the build ids of the workers that completed the run's workflow tasks, and
// the number of failed workflow tasks. A task the server refused because new events came in
// while it ran (cause UNHANDLED_COMMAND, e.g. a child ending as the run continues as new) is
// redone on the same build and is not counted: it says nothing about the code.
func taskBuilds(t *testing.T, workflowID, runID string) (builds []string, failed int) {
	t.Helper()
	for _, ev := range runHistory(t, workflowID, runID) {
		if done := ev.GetWorkflowTaskCompletedEventAttributes(); done != nil {
			builds = append(builds, done.GetDeploymentVersion().GetBuildId())
		}
		if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
			t.Logf("run %s of %s: workflow task failed: %v: %s", runID, workflowID, f.GetCause(), f.GetFailure().GetMessage())
			if f.GetCause() != enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND {
				failed++
			}
		}
	}
	return builds, failed
}

// buildChain walks the chain of runs of workflowID from its first run and returns the build
// of each. It asserts that no run failed a workflow task and that each ran on one build: a
// long-lived workflow moves to a new build only at continue-as-new.
func buildChain(t *testing.T, workflowID string) []string {
	t.Helper()
	desc, err := env.c.DescribeWorkflowExecution(context.Background(), workflowID, "")
	require.NoError(t, err)
	var chain []string
	for id := desc.GetWorkflowExecutionInfo().GetFirstRunId(); id != ""; {
		builds, failed := taskBuilds(t, workflowID, id)
		assert.Zero(t, failed, "run %s of %s failed a workflow task", id, workflowID)
		if len(builds) == 0 {
			break // the last run has not completed a task yet
		}
		assert.Equal(t, builds[:1], slices.Compact(builds), "every workflow task of run %s of %s ran on one build", id, workflowID)
		chain = append(chain, builds[0])
		evs := runHistory(t, workflowID, id)
		id = evs[len(evs)-1].GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
	}
	return chain
}

// TestRolloutToANewBuild rolls a deployment from build A (the shipped workflows) to build B
// (whose StartSubagent records one more command): runs started on A finish on A, runs started
// after B became current run on B, no workflow task fails, a batch started on A crosses to B
// at a continue-as-new and so does an admission, A drains and stops; the replay gate passes on these histories for either build.
func TestRolloutToANewBuild(t *testing.T) {
	deployment := "rollout-" + uuid.NewString()[:8]
	queue := "rollout-" + uuid.NewString()
	dir := t.TempDir()
	slow := script(t, dir, `{"delayMs": 3000, "text": "slow answer", "chunks": 3}`)
	fast := script(t, dir, `{"text": "ok"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	defer cancel()
	startRun := func(scriptPath, prompt string) client.WorkflowRun {
		in := rootInput(subagent.ProviderSpawn, dir, scriptPath, prompt)
		_, run, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: queue, Input: in})
		require.NoError(t, err)
		return run
	}

	stopA := deployedWorker(t, deployment, "a", queue, nil)
	setCurrent(t, deployment, "a")
	// B's workers poll from the start, getting nothing until B is current, so that B becomes
	// current while A's runs are in their first model request.
	deployedWorker(t, deployment, "b", queue, registerB)
	h := env.c.WorkerDeploymentClient().GetHandle(deployment)
	require.Eventually(t, func() bool {
		_, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: "b"})
		return err == nil
	}, waitLimit, 50*time.Millisecond, "build b polls")
	var tasks []workflows.Task
	for i := range 6 {
		tasks = append(tasks, scriptedTask(subagent.ProviderSpawn, dir, slow, fmt.Sprintf("batch task %d", i)))
	}
	// Two batches: one continues as new every 2 starts anyway, the other (its threshold far
	// beyond its tasks) only because B became current.
	var batches []client.WorkflowRun
	for _, threshold := range []int{2, 1000} {
		batchID := fmt.Sprintf("batch-%d-%s", threshold, uuid.NewString())
		batch, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: queue},
			workflows.BatchWorkflowName, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Total: len(tasks), Concurrency: 2, ContinueAsNewAfter: threshold})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			v, err := env.c.QueryWorkflow(ctx, batchID, "", workflows.QueryProgress)
			var sum workflows.BatchSummary
			return err == nil && v.Get(&sum) == nil && sum.Running > 0
		}, waitLimit, 50*time.Millisecond, "batch %s starts children on A", batchID)
		batches = append(batches, batch)
	}
	admissionID := workflows.AdmissionWorkflowID("rollout-" + uuid.NewString()[:8])
	_, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: admissionID, TaskQueue: queue},
		workflows.AdmissionWorkflowName, workflows.AdmissionInput{Provider: "rollout", Limit: 10, PermitTTL: time.Hour})
	require.NoError(t, err)
	acquire := func() {
		h, err := env.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: admissionID, UpdateName: workflows.UpdateAcquire,
			WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		var permit string
		require.NoError(t, h.Get(ctx, &permit))
	}
	acquire()
	var onA, onB []client.WorkflowRun
	for i := range 20 {
		onA = append(onA, startRun(slow, fmt.Sprintf("long run %d", i)))
	}

	// A's workers stop while its runs are in their first model request: the runs pinned to A
	// wait for a worker of A, whatever else polls the queue, so they are certainly in flight
	// when B becomes current.
	stopA()
	open := 0
	for _, run := range onA {
		desc, err := env.c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		require.NoError(t, err)
		if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			open++
		}
	}
	require.Positive(t, open, "some runs of build A are in flight")
	setCurrent(t, deployment, "b")
	for i := range 20 {
		onB = append(onB, startRun(fast, fmt.Sprintf("new run %d", i)))
	}

	// A's workers come back (a rolling deployment keeps them until A drains) and finish A's runs.
	stopA = deployedWorker(t, deployment, "a", queue, nil)
	for name, runs := range map[string][]client.WorkflowRun{"a": onA, "b": onB} {
		for _, run := range runs {
			var out workflows.Outcome
			require.NoError(t, run.Get(ctx, &out), "run %s", run.GetID())
			assert.Equal(t, subagent.StopCompleted, out.Result.StopReason, "run %s", run.GetID())
			builds, failed := taskBuilds(t, run.GetID(), run.GetRunID())
			assert.Zero(t, failed, "run %s failed a workflow task", run.GetID())
			require.NotEmpty(t, builds)
			for _, b := range builds {
				assert.Equal(t, name, b, "every workflow task of run %s ran on build %s", run.GetID(), name)
			}
		}
	}

	for _, batch := range batches {
		batchID := batch.GetID()
		var sum workflows.BatchSummary
		require.NoError(t, batch.Get(ctx, &sum))
		assert.True(t, sum.Completed(), "%+v", sum)
		assert.Equal(t, len(tasks), sum.ByStopReason[subagent.StopCompleted], "%+v", sum)
		chain := buildChain(t, batchID)
		assert.Equal(t, []string{"a", "b"}, slices.Compact(chain), "batch %s went from build A to B", batchID)
	}
	// The admission, idle on A since its first permit, moves to B on its next acquire.
	acquire()
	require.Eventually(t, func() bool {
		return slices.Equal([]string{"a", "b"}, slices.Compact(buildChain(t, admissionID)))
	}, waitLimit, 100*time.Millisecond, "the admission continues as new on build B")
	acquire()
	require.NoError(t, env.c.TerminateWorkflow(ctx, admissionID, "", "test over"))

	// The gate of either build passes: the runs pinned to the other build are skipped.
	for build, register := range map[string]func(worker.WorkflowRegistry){"a": nil, "b": registerB} {
		rep, err := app.Replay(ctx, app.ReplayOptions{Client: env.c, Namespace: env.srv.Namespace(), Closed: 200, TaskQueues: []string{queue},
			DeploymentName: deployment, BuildID: build, Workflows: register})
		require.NoError(t, err)
		assert.Empty(t, rep.Failed, "build %s", build)
		assert.NotEmpty(t, rep.Replayed, "build %s", build)
	}

	// Build B's code under A's build id (an id reused for other code) breaks every run pinned
	// to A — A's runs and the batch's children that started on A — and the gate names each;
	// the batch's runs (their code unchanged) still replay.
	rep, err := app.Replay(ctx, app.ReplayOptions{Client: env.c, Namespace: env.srv.Namespace(), Closed: 200, TaskQueues: []string{queue},
		DeploymentName: deployment, BuildID: "a", Workflows: registerB})
	require.NoError(t, err)
	var broken []string
	for _, f := range rep.Failed {
		broken = append(broken, f.Run)
		assert.True(t, strings.HasPrefix(f.Run, "subagent-"), "only StartSubagent runs fail: %s", f.Run)
	}
	for _, run := range onA {
		assert.Contains(t, broken, fmt.Sprintf("%s (run %s)", run.GetID(), run.GetRunID()))
	}

	// A drains: no open run is pinned to it any more; then its workers stop.
	require.Eventually(t, func() bool {
		d, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: "a"})
		return err == nil && d.Info.DrainageInfo != nil &&
			d.Info.DrainageInfo.DrainageStatus == client.WorkerDeploymentVersionDrainageStatusDrained
	}, waitLimit, 200*time.Millisecond, "build a drains")
	stopA()
	run := startRun(fast, "after a stopped")
	var out workflows.Outcome
	require.NoError(t, run.Get(ctx, &out))
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
}

// TestMixedReleases starts runs the shared worker's release does not know, or knows only in
// part: a workflow type of a newer release is refused at once with a message naming the side
// to upgrade, whether started with its update or alone; a StartSubagent input with a field of
// a newer release, or without the optional fields of this one, runs; a batch update of a
// newer release is refused naming the side to upgrade.
func TestMixedReleases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const newer = "StartSubagentOfANewerRelease"

	op := env.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: "newer-" + uuid.NewString(), TaskQueue: env.taskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}, newer, map[string]any{"provider": "spawn"})
	handle, err := env.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions:          client.UpdateWorkflowOptions{UpdateName: workflows.UpdatePublished, WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err == nil {
		err = handle.Get(ctx, nil)
	}
	require.Error(t, err, "the start is refused")
	assert.Contains(t, err.Error(), `workflow type "StartSubagentOfANewerRelease" is unknown to this subflow worker`)
	assert.Contains(t, err.Error(), "upgrade the workers")

	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "newer-" + uuid.NewString(), TaskQueue: env.taskQueue}, newer)
	require.NoError(t, err)
	err = run.Get(ctx, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the starter is newer than the workers; upgrade the workers")

	// A batch update of a newer release is refused naming the side to upgrade; the batch
	// goes on.
	dir := t.TempDir()
	batchID := "mixed-" + uuid.NewString()
	batch, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: env.taskQueue}, workflows.BatchWorkflowName,
		workflows.BatchInput{BatchID: batchID, Tasks: []workflows.Task{scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"delayMs": 1000, "text": "ok"}`), "long")}, Total: 1})
	require.NoError(t, err)
	err = subflow.UpdateBatch(ctx, env.c, batchID, "resizeOfANewerRelease", nil, 3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `update "resizeOfANewerRelease" of batch `+batchID+` is unknown to the worker running it: the starter is newer than the workers; upgrade the workers`)
	var sum workflows.BatchSummary
	require.NoError(t, batch.Get(ctx, &sum))
	assert.True(t, sum.Completed(), "%+v", sum)

	in := rootInput(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "ok"}`), "mixed releases")
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	fields["fieldOfANewerRelease"] = map[string]any{"any": "value"}
	run, err = env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "older-" + uuid.NewString(), TaskQueue: env.taskQueue},
		workflows.WorkflowName, fields)
	require.NoError(t, err)
	var out workflows.Outcome
	require.NoError(t, run.Get(ctx, &out))
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "ok", session.JoinText(out.Result.Output))
}
