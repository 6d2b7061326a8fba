package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/bench/figures"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/internal/hostcpu"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// The load of BenchmarkInteractiveLatency: two batches of half-second drives, each at this
// concurrency, on a worker of loadSlots activity slots (SUBFLOW_BENCH_LOAD_SLOTS overrides
// it); interactiveRuns runs measured in each case (SUBFLOW_BENCH_RUNS overrides it).
const (
	loadSlots        = 8
	loadConcurrency  = 64
	loadBatchTasks   = subflow.InlineMaxTasks
	interactiveRuns  = 20
	loadDriveDelayMs = 500
)

// BenchmarkInteractiveLatency measures what a person waits for a one-answer run (start to
// outcome, subflow.Start) on a task queue whose worker (loadSlots activity slots) two batches
// saturate, each loadConcurrency half-second drives at a time, against the same run on the
// idle queue. Reported, p50 and p99 of interactiveRuns sequential runs each:
//
//   - idle-: the queue idle;
//   - loaded-: under the two batches as they saturate the worker, their first children
//     still starting, the run at its default priority (workflows.RunPriority, ahead of the
//     batches' workflows.BatchPriority, its drive on the queue's interactive lane);
//   - steady-: the same, once each batch has finished as many tasks as its concurrency and
//     starts a child as one ends: the load a long batch puts on the worker;
//   - fair-only-: the steady load with the run at the batches' priority under a fairness key
//     of its own: what fairness alone gives, without priority (on a server without fairness
//     it would queue behind the batches);
//
// loaded-vs-idle and steady-vs-idle are ratios of p50s. With each case's
// <case>-queued-p50-ms, how long a run's tasks waited in task queues (the sum of their
// schedule-to-start, from its history): the rest of its latency is the work itself, which
// the load slows when it takes the machine's CPU. idle-, loaded- and steady-cpu-busy are the
// share of the machine's CPU time (all cores, every process: on a cluster its services too)
// that was busy while those runs were measured, theirs included; fewer load slots
// (SUBFLOW_BENCH_LOAD_SLOTS) leave more of it idle, which tells the CPU's part of the ratio
// from the queues'. steady-batch-rate-vs-alone is the batches' rate while the steady runs
// are measured and for 2 s after, over their rate for 3 s just before with no run: what the
// runs cost them. And batch-share, the tasks one batch finished over the other's by the
// end, 1 for their equal weights. With SUBFLOW_BENCH_RECORD=1 it appends the p50 and p99 of
// each case to bench/results/interactive-latency.tsv and redraws
// docs/img/interactive-latency.svg. SUBFLOW_BENCH_POLLERS sets the worker's pollers
// (app.Options.Pollers), SUBFLOW_BENCH_YIELD the activity slots each of its queues keeps
// while an interactive run is in hand on a busy host (app.Options.YieldActivities, as
// `worker --yield-activities` reads it: N, auto, or 0, the default, never to yield).
//
//	go test -run '^$' -bench InteractiveLatency -benchtime 1x -timeout 30m ./bench/
func BenchmarkInteractiveLatency(b *testing.B) {
	runs := envCount("SUBFLOW_BENCH_RUNS", interactiveRuns)
	queue := "bench-interactive-" + uuid.NewString()
	w, cleanup, err := app.New(env.c, app.Options{TaskQueue: queue, SessionRoot: filepath.Join(env.tmp, "sessions"),
		MaxConcurrentActivities: envCount("SUBFLOW_BENCH_LOAD_SLOTS", loadSlots), Pollers: envCount("SUBFLOW_BENCH_POLLERS", 0),
		YieldActivities: envYield(b), Logger: zap.NewNop()})
	require.NoError(b, err)
	require.NoError(b, w.Start())
	defer func() {
		w.Stop()
		_ = cleanup()
	}()
	dir := b.TempDir()
	done := doneScript(b, dir)
	slow := filepath.Join(dir, "half-second.json")
	require.NoError(b, os.WriteFile(slow, []byte(fmt.Sprintf(`{"responses": [{"text": "batch", "delayMs": %d}]}`, loadDriveDelayMs)), 0o644))

	// measure returns the latency of each run and the time its tasks waited in task queues.
	measure := func(prio temporal.Priority) (lat, queued []time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		lat, queued = make([]time.Duration, runs), make([]time.Duration, runs)
		for i := range lat {
			begin := time.Now()
			_, run, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: queue,
				Input: rootInput(subagent.ProviderSpawn, dir, done), Priority: prio})
			require.NoError(b, err)
			var out workflows.Outcome
			require.NoError(b, run.Get(ctx, &out))
			lat[i] = time.Since(begin)
			require.Equal(b, subagent.StopCompleted, out.Result.StopReason)
			queued[i] = queuedTime(b, run)
		}
		return lat, queued
	}
	// awaitLoad waits until every batch of ids is at least where reached (the load named
	// what) says; past waitLimit it fails with where each batch last stood.
	awaitLoad := func(ids []string, what string, reached func(workflows.BatchSummary) bool) {
		for deadline := time.Now().Add(waitLimit); ; time.Sleep(100 * time.Millisecond) {
			var stood []string
			all := true
			for _, id := range ids {
				s, err := subflow.BatchSummaryOf(context.Background(), env.c, id)
				if err != nil {
					stood = append(stood, fmt.Sprintf("%s: %v", id, err))
				} else {
					stood = append(stood, fmt.Sprintf("%s: %d running, %d done, %d queued, unanswered %q", id, s.Running, s.Done, s.Queued, s.Unanswered))
				}
				all = all && err == nil && reached(s)
			}
			if all {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("the batches are not %s after %s: %s", what, waitLimit, strings.Join(stood, "; "))
			}
		}
	}
	startLoad := func() (ids []string, runs []client.WorkflowRun) {
		tasks := make([]workflows.Task, loadBatchTasks)
		for i := range tasks {
			tasks[i] = workflows.Task{Task: fmt.Sprintf("task %d", i), Cwd: dir, ModelProvider: model.ProviderScripted, Model: slow}
		}
		for range 2 {
			id := "bench-load-" + uuid.NewString()
			run, err := env.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue,
				Priority: workflows.BatchPriorityOf(id, 0, "", 0)}, workflows.BatchWorkflowName,
				workflows.BatchInput{BatchID: id, Tasks: tasks, Total: len(tasks), Concurrency: loadConcurrency, TaskQueue: queue})
			require.NoError(b, err)
			ids, runs = append(ids, id), append(runs, run)
		}
		// Saturated: every slot busy and drives queued behind them.
		awaitLoad(ids, fmt.Sprintf("running %d children each", loadConcurrency),
			func(s workflows.BatchSummary) bool { return s.Running >= loadConcurrency })
		return ids, runs
	}
	// awaitSteady waits until each batch has finished as many tasks as its concurrency: its
	// first children, started together, are done, and it starts one as one ends.
	awaitSteady := func(ids []string) {
		awaitLoad(ids, fmt.Sprintf("%d tasks done each", loadConcurrency),
			func(s workflows.BatchSummary) bool { return s.Done >= loadConcurrency })
	}
	// answered is the summary of batch id from its own progress query: a batch that does not
	// answer in time (a saturated server) is summed up from its start and visibility, so ask
	// again.
	answered := func(id string) workflows.BatchSummary {
		var s workflows.BatchSummary
		require.Eventually(b, func() bool {
			var err error
			s, err = subflow.BatchSummaryOf(context.Background(), env.c, id)
			require.NoError(b, err)
			return s.Unanswered == ""
		}, waitLimit, 100*time.Millisecond, "batch %s answers its progress query", id)
		return s
	}
	// batchRate is the tasks the batches of ids finished per second while f ran.
	batchRate := func(ids []string, f func()) float64 {
		done := func() (n int) {
			for _, id := range ids {
				n += answered(id).Done
			}
			return n
		}
		before, begin := done(), time.Now()
		f()
		return float64(done()-before) / time.Since(begin).Seconds()
	}
	stopLoad := func(ids []string, runs []client.WorkflowRun) (done []int) {
		for i, id := range ids {
			s := answered(id)
			require.Less(b, s.Done, loadBatchTasks, "batch %s ended before the runs under it were measured", id)
			done = append(done, s.Done)
			require.NoError(b, env.c.CancelWorkflow(context.Background(), id, ""))
			_ = runs[i].Get(context.Background(), nil)
		}
		return done
	}

	for b.Loop() {
		var idle, idleQueued, loaded, loadedQueued, steady, steadyQueued []time.Duration
		busyDuring(b, "idle-cpu-busy", func() { idle, idleQueued = measure(temporal.Priority{}) })
		ids, load := startLoad()
		busyDuring(b, "loaded-cpu-busy", func() { loaded, loadedQueued = measure(temporal.Priority{}) })
		awaitSteady(ids)
		// The batches' rate at steady state with no run, then while the runs are measured:
		// what the runs cost them (a worker that yields to them, SUBFLOW_BENCH_YIELD).
		alone := batchRate(ids, func() { time.Sleep(3 * time.Second) })
		beside := batchRate(ids, func() {
			busyDuring(b, "steady-cpu-busy", func() { steady, steadyQueued = measure(temporal.Priority{}) })
			time.Sleep(2 * time.Second) // a yielding worker's hold after the last run
		})
		b.ReportMetric(beside/alone, "steady-batch-rate-vs-alone")
		fairOnly, fairOnlyQueued := measure(temporal.Priority{PriorityKey: workflows.BatchPriority, FairnessKey: "interactive"})
		done := stopLoad(ids, load)
		b.Logf("tasks done by each batch when they were cancelled: %v", done)
		idleP50 := percentile(idle, 50)
		reportPercentiles(b, idle, "idle-")
		reportPercentiles(b, loaded, "loaded-")
		reportPercentiles(b, steady, "steady-")
		reportPercentiles(b, fairOnly, "fair-only-")
		b.ReportMetric(ms(percentile(idleQueued, 50)), "idle-queued-p50-ms")
		b.ReportMetric(ms(percentile(loadedQueued, 50)), "loaded-queued-p50-ms")
		b.ReportMetric(ms(percentile(steadyQueued, 50)), "steady-queued-p50-ms")
		b.ReportMetric(ms(percentile(fairOnlyQueued, 50)), "fair-only-queued-p50-ms")
		b.ReportMetric(float64(percentile(loaded, 50))/float64(idleP50), "loaded-vs-idle")
		b.ReportMetric(float64(percentile(steady, 50))/float64(idleP50), "steady-vs-idle")
		if done[1] > 0 {
			b.ReportMetric(float64(done[0])/float64(done[1]), "batch-share")
		}
		record(b, "BenchmarkInteractiveLatency", func(s recordStamp) error {
			var rows []figures.LatencyRow
			for _, c := range []struct {
				name string
				lat  []time.Duration
			}{{"idle", idle}, {"loaded", loaded}, {"steady", steady}, {"fair-only", fairOnly}} {
				rows = append(rows, figures.LatencyRow{Date: s.date, Server: s.server, Case: c.name,
					P50ms: ms(percentile(c.lat, 50)), P99ms: ms(percentile(c.lat, 99)), Note: s.note})
			}
			return figures.AppendLatency(filepath.Join(resultsDir, figures.LatencyFile), rows...)
		})
	}
	b.ReportMetric(0, "ns/op")
}

// queuedTime is how long the tasks of run waited in task queues, from its history: the sum of
// each workflow and activity task's schedule-to-start. What is left of a run's latency is
// the work itself, the worker's and the server's.
func queuedTime(b *testing.B, run client.WorkflowRun) time.Duration {
	b.Helper()
	iter := env.c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := map[int64]time.Time{}
	var total time.Duration
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(b, err)
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = at
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			total += at.Sub(scheduled[ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()])
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			total += at.Sub(scheduled[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()])
		}
	}
	return total
}

// busyDuring runs f and reports as metric the share of the machine's CPU time that was busy
// meanwhile, as the yielding worker reads it (internal/hostcpu), where /proc/stat tells it
// (Linux); elsewhere it reports nothing.
func busyDuring(b *testing.B, metric string, f func()) {
	before, err := hostcpu.Read(hostcpu.Path)
	f()
	after, err2 := hostcpu.Read(hostcpu.Path)
	if err == nil && err2 == nil && after.Total > before.Total {
		b.ReportMetric(after.BusyShareSince(before), metric)
	}
}

// envYield is SUBFLOW_BENCH_YIELD read as `worker --yield-activities` reads its value, 0
// (never yield, the worker's default) when unset.
func envYield(b *testing.B) int {
	n := 0
	if v := os.Getenv("SUBFLOW_BENCH_YIELD"); v != "" {
		require.NoError(b, app.YieldFlag(&n).Set(v), "SUBFLOW_BENCH_YIELD")
	}
	return n
}
