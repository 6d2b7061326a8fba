package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// oneSlotWorker starts a worker of one activity slot on a task queue of its own, so that the
// activities of the runs on it queue in the server, and returns the queue.
func oneSlotWorker(t *testing.T) string {
	return oneSlotWorkerRegistering(t, nil)
}

// oneSlotWorkerRegistering is oneSlotWorker registering the workflows with register
// (app.Options.Workflows).
func oneSlotWorkerRegistering(t *testing.T, register func(worker.WorkflowRegistry)) string {
	t.Helper()
	queue := "priority-" + uuid.NewString()
	w, cleanup, err := app.New(env.c, app.Options{TaskQueue: queue, SessionRoot: env.sessionRoot,
		MaxConcurrentActivities: 1, Logger: zap.NewNop(), Workflows: register})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		w.Stop()
		_ = cleanup()
	})
	return queue
}

// startPrioritizedBatch starts a batch of n tasks on queue with the priority `starter batch`
// gives it (workflows.BatchPriorityOf), every task running at once.
func startPrioritizedBatch(t *testing.T, queue string, weight float32, tasks []workflows.Task) (string, client.WorkflowRun) {
	t.Helper()
	id := "batch-" + uuid.NewString()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue,
		Priority: workflows.BatchPriorityOf(id, 0, "", weight)},
		workflows.BatchWorkflowName, workflows.BatchInput{BatchID: id, Tasks: tasks, Total: len(tasks),
			Concurrency: len(tasks), TaskQueue: queue})
	require.NoError(t, err)
	return id, run
}

// dispatch is one task of a run as its history records it: when it was scheduled (entered
// the task queue) and when a worker started it.
type dispatch struct {
	run                string
	kind               string // the activity type, or "workflow task"
	queue              string // the task queue of the task (a workflow task's normal or sticky)
	scheduled, started time.Time
}

// dispatches reads the activity and workflow tasks of a run from its history.
func dispatches(t *testing.T, workflowID, runID string) []dispatch {
	t.Helper()
	events := history(t, env.c, fakeRun{id: workflowID, runID: runID})
	byID := map[int64]*historypb.HistoryEvent{}
	var out []dispatch
	for _, ev := range events {
		byID[ev.GetEventId()] = ev
		var sched *historypb.HistoryEvent
		kind, queue := "workflow task", ""
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			sched = byID[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]
			a := sched.GetActivityTaskScheduledEventAttributes()
			kind, queue = a.GetActivityType().GetName(), a.GetTaskQueue().GetName()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			sched = byID[ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()]
			queue = sched.GetWorkflowTaskScheduledEventAttributes().GetTaskQueue().GetName()
		default:
			continue
		}
		out = append(out, dispatch{run: workflowID, kind: kind, queue: queue, scheduled: sched.GetEventTime().AsTime(), started: ev.GetEventTime().AsTime()})
	}
	return out
}

// fakeRun names a workflow run for history.
type fakeRun struct {
	client.WorkflowRun
	id, runID string
}

func (r fakeRun) GetID() string    { return r.id }
func (r fakeRun) GetRunID() string { return r.runID }

// TestInteractiveRunGoesAheadOfBatch: with a batch's activities queued on a worker of one
// activity slot, a run at workflows.RunPriority started on the batch's queue has its tasks
// dispatched ahead of the batch's tasks that were queued before them: for each of its tasks,
// read from the histories, batch tasks scheduled earlier start after it, and at most the one
// a poll already held starts between its scheduling and its start. The worker registers the
// workflows without the interactive lane, so that the run's drive queues on the batch's
// queue too: the task queue's priority alone puts the run ahead.
func TestInteractiveRunGoesAheadOfBatch(t *testing.T) {
	queue := oneSlotWorkerRegistering(t, workflows.Register)
	dir := t.TempDir()
	slow := script(t, dir, `{"text": "batch answer", "delayMs": 200}`)
	fast := script(t, dir, `{"text": "interactive answer"}`)
	const n = 30
	tasks := spawnTasks(dir, slow, n)
	batchID, batch := startPrioritizedBatch(t, queue, 0, tasks)
	// A saturating batch: every child started, most of their activities queued.
	require.Eventually(t, func() bool {
		p, err := batchProgress(t, batchID)
		return err == nil && p.Running+p.Done == n && p.Done >= 3
	}, waitLimit, 20*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// The run starts on the batch's queue, as a client starting StartSubagent by its type
	// name does (subflow.Start would take the queue's interactive lane), and shares the
	// batch's fairness key, so that its priority alone puts it ahead: with a key of its own,
	// fairness would also dispatch it next, a new key starting level with the batch's.
	run := startOnQueue(t, queue, rootInput(subagent.ProviderSpawn, dir, fast, "interactive"),
		temporal.Priority{PriorityKey: workflows.RunPriority, FairnessKey: batchID})
	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	require.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	p, err := batchProgress(t, batchID)
	require.NoError(t, err)
	require.Less(t, p.Done, n, "the batch was still running when the run ended")
	require.NoError(t, batch.Get(ctx, nil))

	// The status query and the summary show the priorities, a child's as it inherited it.
	assert.Equal(t, &workflows.Priority{PriorityKey: workflows.BatchPriority, FairnessKey: batchID}, p.Priority)
	st, err := subflow.Describe(ctx, env.c, run.GetID(), "")
	require.NoError(t, err)
	assert.Equal(t, &workflows.Priority{PriorityKey: workflows.RunPriority, FairnessKey: batchID}, st.Priority)
	st, err = subflow.Describe(ctx, env.c, workflows.BatchChildWorkflowID(batchID, 0), "")
	require.NoError(t, err)
	assert.Equal(t, &workflows.Priority{PriorityKey: workflows.BatchPriority, FairnessKey: batchID}, st.Priority)

	mine := dispatches(t, run.GetID(), run.GetRunID())
	var theirs []dispatch
	for i := range n {
		theirs = append(theirs, dispatches(t, workflows.BatchChildWorkflowID(batchID, i), "")...)
	}
	overtaken := 0
	for _, d := range mine {
		ahead, cutIn := 0, 0
		for _, b := range theirs {
			// Tasks of one kind on the same queue (a workflow task's normal or sticky one).
			if (b.kind == "workflow task") != (d.kind == "workflow task") || b.queue != d.queue || !b.scheduled.Before(d.scheduled) {
				continue
			}
			switch {
			case b.started.After(d.started):
				ahead++
			case b.started.After(d.scheduled):
				cutIn++
			}
		}
		t.Logf("%s: queued %v, ahead of %d batch tasks queued before it, %d of those started first",
			d.kind, d.started.Sub(d.scheduled), ahead, cutIn)
		assert.LessOrEqual(t, cutIn, 1, "%s: batch tasks queued before it started first", d.kind)
		if d.kind != "workflow task" {
			overtaken += ahead
		}
	}
	assert.Positive(t, overtaken, "the run's activities overtook no queued batch task: no backlog to test against")
}

// startOnQueue starts StartSubagent with in on queue itself at priority p, by Update-with-Start
// as subflow.Start does, and returns the run once it published.
func startOnQueue(t *testing.T, queue string, in workflows.StartInput, p temporal.Priority) client.WorkflowRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	in.ChildID = uuid.NewString()
	opts := subflow.StartWorkflowOptions(workflows.WorkflowID(in.ChildID), queue, in)
	opts.Priority = p
	op := env.c.NewWithStartWorkflowOperation(opts, workflows.StartSubagent, in)
	h, err := env.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: workflows.UpdatePublished, WaitForStage: client.WorkflowUpdateStageCompleted}})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	run, err := op.Get(ctx)
	require.NoError(t, err)
	return run
}

// TestBatchesShareWorkersByWeight: two batches of weights 3 and 1 started together on a
// worker of one activity slot progress 3:1 (the server's task-queue fairness, each batch's
// tasks under its own fairness key): when half of all their children have started their
// drive, the batch of weight 3 has started 3 times as many as the other, within 20 %.
func TestBatchesShareWorkersByWeight(t *testing.T) {
	queue := oneSlotWorker(t)
	dir := t.TempDir()
	answer := script(t, dir, `{"text": "batch answer", "delayMs": 20}`)
	const n, concurrency = 60, 6
	tasks := spawnTasks(dir, answer, n)
	startBatch := func(weight float32) (string, client.WorkflowRun) {
		id := "batch-" + uuid.NewString()
		run, err := env.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue,
			Priority: workflows.BatchPriorityOf(id, 0, "", weight)},
			workflows.BatchWorkflowName, workflows.BatchInput{BatchID: id, Tasks: tasks, Total: n,
				Concurrency: concurrency, TaskQueue: queue})
		require.NoError(t, err)
		return id, run
	}
	heavy, heavyRun := startBatch(3)
	light, lightRun := startBatch(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	var sum workflows.BatchSummary
	require.NoError(t, heavyRun.Get(ctx, &sum))
	assert.Equal(t, &workflows.Priority{PriorityKey: workflows.BatchPriority, FairnessKey: heavy, FairnessWeight: 3}, sum.Priority)
	require.NoError(t, lightRun.Get(ctx, nil))

	type started struct {
		heavy bool
		at    time.Time
	}
	var drives, children []started
	for _, b := range []string{heavy, light} {
		for i := range n {
			id := workflows.BatchChildWorkflowID(b, i)
			for _, d := range dispatches(t, id, "") {
				if d.kind == workflows.ActivityDrive {
					drives = append(drives, started{b == heavy, d.started})
				}
			}
			desc, err := env.c.DescribeWorkflowExecution(ctx, id, "")
			require.NoError(t, err)
			children = append(children, started{b == heavy, desc.GetWorkflowExecutionInfo().GetStartTime().AsTime()})
		}
	}
	half := func(starts []started) (h, l int) {
		slices.SortFunc(starts, func(a, b started) int { return a.at.Compare(b.at) })
		for _, s := range starts[:len(starts)/2] {
			if s.heavy {
				h++
			} else {
				l++
			}
		}
		return h, l
	}
	dh, dl := half(drives)
	ch, cl := half(children)
	t.Logf("at the half-way point: drives started %d:%d, children started %d:%d", dh, dl, ch, cl)
	require.Len(t, drives, 2*n)
	require.Positive(t, dl)
	assert.InDelta(t, 3, float64(dh)/float64(dl), 0.6, "drives started by the batches of weight 3 and 1: %d:%d", dh, dl)
}

// driveQueues returns the task queue of each Drive the run scheduled, and whether its last
// one completed.
func driveQueues(t *testing.T, workflowID, runID string) (queues []string, completed bool) {
	t.Helper()
	for _, ev := range history(t, env.c, fakeRun{id: workflowID, runID: runID}) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == workflows.ActivityDrive {
			queues, completed = append(queues, a.GetTaskQueue().GetName()), false
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
			completed = true
		}
	}
	return queues, completed
}

// TestInteractiveRunTakesNoBatchSlot: on a worker of one activity slot that a batch's drive
// holds, a run started on its own (subflow.Start) runs on its queue's interactive lane, every
// workflow and activity task of it, and completes while the batch's drive still runs; the
// batch's drives stay on the queue.
func TestInteractiveRunTakesNoBatchSlot(t *testing.T) {
	queue := oneSlotWorker(t)
	dir := t.TempDir()
	// The batch's drive streams for a minute, or until the batch is cancelled.
	slow := script(t, dir, `{"text": "batch answer", "chunks": 12, "delayMs": 60000}`)
	fast := script(t, dir, `{"text": "interactive answer"}`)
	batchID, batch := startPrioritizedBatch(t, queue, 0, []workflows.Task{scriptedTask(subagent.ProviderSpawn, dir, slow, "task 0")})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	child := workflows.BatchChildWorkflowID(batchID, 0)
	require.Eventually(t, func() bool {
		st, err := subflow.Describe(ctx, env.c, child, "")
		return err == nil && st.Phase == workflows.PhaseDriving
	}, waitLimit, 20*time.Millisecond, "the batch's drive holds the worker's one slot")

	_, run, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: queue,
		Input: rootInput(subagent.ProviderSpawn, dir, fast, "interactive")})
	require.NoError(t, err)
	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	require.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	batchQueues, batchDone := driveQueues(t, child, "")
	require.NoError(t, env.c.CancelWorkflow(ctx, batchID, ""))
	_ = batch.Get(ctx, nil)

	lane := workflows.InteractiveQueue(queue)
	mine, _ := driveQueues(t, run.GetID(), run.GetRunID())
	assert.Equal(t, []string{lane}, mine, "the run drove on the interactive lane")
	desc, err := env.c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	assert.Equal(t, lane, desc.GetExecutionConfig().GetTaskQueue().GetName(), "the run started on the interactive lane")
	for _, d := range dispatches(t, run.GetID(), run.GetRunID()) {
		if d.kind == "workflow task" {
			assert.NotEqual(t, queue, d.queue, "a workflow task of the run was on the batch's queue")
		} else {
			assert.Equal(t, lane, d.queue, "activity %s of the run", d.kind)
		}
	}
	assert.Equal(t, []string{queue}, batchQueues, "the batch's task drove on the queue")
	assert.False(t, batchDone, "the run completed while the batch's drive held the queue's slot")
}

// TestInteractiveRunTakesTheLaneItsBuildPolls: during a rolling upgrade from a build whose
// workers poll no workflow tasks on the interactive lane (one that predates them there) to
// one whose workers do, subflow.Start starts an interactive run on the queue while the old
// build is current, though the new build's workers poll the lane already (a run on the lane
// would wait for the new build to become current), and on the lane once the new build is
// current.
func TestInteractiveRunTakesTheLaneItsBuildPolls(t *testing.T) {
	deployment, queue := "lane-"+uuid.NewString(), "lane-"+uuid.NewString()
	lane := workflows.InteractiveQueue(queue)
	// The old build runs the workflows on queue alone, no lane, no activities.
	old := worker.New(env.c, queue, worker.Options{DeploymentOptions: worker.DeploymentOptions{UseVersioning: true,
		Version: worker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: "old"}}})
	workflows.Register(old)
	require.NoError(t, old.Start())
	t.Cleanup(old.Stop)
	setCurrent(t, deployment, "old")
	deployedWorker(t, deployment, "new", queue, nil)
	newBuild := worker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: "new"}
	require.Eventually(t, func() bool {
		q, err := subflow.ReadQueueVersions(context.Background(), env.c, lane)
		return err == nil && q.Polled(&newBuild)
	}, waitLimit, 50*time.Millisecond, "the new build polls the lane")

	dir := t.TempDir()
	in := rootInput(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "answer"}`), "interactive")
	in.ChildID = uuid.NewString()
	// The old build's worker has no activities: its run does not get far.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, _, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: queue, Input: in})
	cancel()
	require.Error(t, err)
	desc, err := env.c.DescribeWorkflowExecution(context.Background(), workflows.WorkflowID(in.ChildID), "")
	require.NoError(t, err)
	assert.Equal(t, queue, desc.GetExecutionConfig().GetTaskQueue().GetName(), "with the old build current, the run starts on the queue")
	_ = env.c.TerminateWorkflow(context.Background(), workflows.WorkflowID(in.ChildID), "", "the old build cannot run it")

	setCurrent(t, deployment, "new")
	require.Eventually(t, func() bool {
		q, err := subflow.ReadQueueVersions(context.Background(), env.c, lane)
		return err == nil && q.Served()
	}, waitLimit, 50*time.Millisecond, "the lane routes to the new build")
	ctx, cancel = context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	in.ChildID = uuid.NewString()
	_, run, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: queue, Input: in})
	require.NoError(t, err)
	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	assert.Equal(t, "answer", session.JoinText(out.Result.Output))
	desc, err = env.c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	assert.Equal(t, lane, desc.GetExecutionConfig().GetTaskQueue().GetName(), "with the new build current, the run starts on the lane")
}

// span is when a drive ran: from its activity's start to its close (the zero end: still
// running).
type span struct{ start, end time.Time }

func (s span) covers(at time.Time) bool {
	return !s.start.After(at) && (s.end.IsZero() || at.Before(s.end))
}

// driveSpans reads when the Drive activities of a run ran from its history.
func driveSpans(t *testing.T, workflowID, runID string) []span {
	t.Helper()
	started := map[int64]time.Time{} // by the activity's scheduled event
	var drives []int64
	ends := map[int64]time.Time{}
	for _, ev := range history(t, env.c, fakeRun{id: workflowID, runID: runID}) {
		at := ev.GetEventTime().AsTime()
		switch {
		case ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == workflows.ActivityDrive:
			drives = append(drives, ev.GetEventId())
		case ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = at
		case ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			ends[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] = at
		case ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			ends[ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()] = at
		case ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			ends[ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()] = at
		case ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			ends[ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()] = at
		}
	}
	var out []span
	for _, id := range drives {
		if s, ok := started[id]; ok {
			out = append(out, span{s, ends[id]})
		}
	}
	return out
}

// mostAtOnce is the most spans running at once at some instant of [from, to]: at from, or
// where one starts.
func mostAtOnce(spans []span, from, to time.Time) int {
	instants := []time.Time{from}
	for _, s := range spans {
		if s.start.After(from) && !s.start.After(to) {
			instants = append(instants, s.start)
		}
	}
	most := 0
	for _, at := range instants {
		n := 0
		for _, s := range spans {
			if s.covers(at) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// busyHost keeps every CPU of the host busy with processes of its own, as other work on a
// shared host does, until the test ends; it returns after 2.5 s, by when a worker's reading
// of the host's CPU (every second) has seen them for a whole second. Each loop also ends
// when this process is gone, so a test binary killed before its cleanup leaves none behind.
func busyHost(t *testing.T) {
	t.Helper()
	loop := fmt.Sprintf("while kill -0 %d 2>/dev/null; do :; done", os.Getpid())
	for range runtime.NumCPU() {
		cmd := exec.Command("sh", "-c", loop)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	time.Sleep(2500 * time.Millisecond)
}

// TestYieldingWorkerHoldsBatchDrives: on a worker of 3 activity slots that yields to
// interactive runs keeping 1 (app.Options.YieldActivities), on a busy host, a batch's
// drives fill the 3 slots; while a run started on its own drives on the lane, once the
// batch's drives started before it (or in the moment it began) have ended, at most 1 batch
// drive runs at a time, and the batch goes on. Read from the histories.
func TestYieldingWorkerHoldsBatchDrives(t *testing.T) {
	queue := "yield-" + uuid.NewString()
	w, cleanup, err := app.New(env.c, app.Options{TaskQueue: queue, SessionRoot: env.sessionRoot,
		MaxConcurrentActivities: 3, YieldActivities: 1, Logger: zap.NewNop()})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		w.Stop()
		_ = cleanup()
	})
	dir := t.TempDir()
	slow := script(t, dir, `{"text": "batch answer", "delayMs": 400}`)
	long := script(t, dir, `{"text": "interactive answer", "chunks": 8, "delayMs": 4000}`)
	const n = 40
	tasks := spawnTasks(dir, slow, n)
	batchID, batch := startPrioritizedBatch(t, queue, 0, tasks)
	require.Eventually(t, func() bool {
		p, err := batchProgress(t, batchID)
		return err == nil && p.Done >= 3
	}, waitLimit, 20*time.Millisecond, "the batch's drives run")
	busyHost(t)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, run, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: queue,
		Input: rootInput(subagent.ProviderSpawn, dir, long, "interactive")})
	require.NoError(t, err)
	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	require.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	require.NoError(t, env.c.CancelWorkflow(ctx, batchID, ""))
	_ = batch.Get(ctx, nil)

	var first time.Time // the run's first task in hand on the lane
	for _, d := range dispatches(t, run.GetID(), run.GetRunID()) {
		if first.IsZero() || d.started.Before(first) {
			first = d.started
		}
	}
	mine := driveSpans(t, run.GetID(), run.GetRunID())
	require.Len(t, mine, 1)
	var theirs []span
	var longest time.Duration
	for i := range n {
		for _, s := range driveSpans(t, workflows.BatchChildWorkflowID(batchID, i), "") {
			theirs = append(theirs, s)
			if !s.end.IsZero() {
				longest = max(longest, s.end.Sub(s.start))
			}
		}
	}
	assert.Equal(t, 3, mostAtOnce(theirs, time.Time{}, first), "before the run, the batch's drives filled the worker's 3 slots")
	// A batch drive whose slot was reserved before the run's first task may start in the
	// moment after it: twice the longest drive past that task, every such drive has ended.
	from := first.Add(2 * longest)
	require.True(t, from.Before(mine[0].end), "the run's drive (%v) outlasts twice the batch's longest (%v)", mine[0].end.Sub(first), longest)
	assert.LessOrEqual(t, mostAtOnce(theirs, from, mine[0].end), 1, "batch drives at once while the run drove")
	during := 0
	for _, s := range theirs {
		if s.start.After(first) && s.start.Before(mine[0].end) {
			during++
		}
	}
	assert.Positive(t, during, "the batch went on while the run drove")
}
