package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// Sizes of BenchmarkHotPath: sequential runs per latency figure, and runs per throughput
// figure (the ceilings' workflows and the batch's tasks), 50 at a time.
const (
	hotPathSequential = 200
	hotPathRuns       = 1000
	ceilingQueue      = "ceiling"

	// ceilingStartBurst is the bound a Batch keeps on its children asked of the server and
	// not yet started (startBurst in workflows/batch.go).
	ceilingStartBurst = 16
)

// emptyWorkflow is the engine's floor: a workflow that does nothing.
func emptyWorkflow(workflow.Context) error { return nil }

// oneActivityWorkflow runs one empty activity: the floor of any integration that does its
// work in an activity.
func oneActivityWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	return workflow.ExecuteActivity(ctx, emptyActivity).Get(ctx, nil)
}

func emptyActivity(context.Context) error { return nil }

// childBatchWorkflow is the engine's floor for a batch: it runs n oneActivityWorkflow child
// workflows, width at a time, on its own task queue, and returns once all of them closed,
// with a histogram of each child's time from its start in the workflow to its result, as a
// Batch keeps one (BatchSummary.Durations), carried across continue-as-new in d.
// Past perRun children (0: never) a run waits for its children to close and continues as new
// with the rest, as a Batch's history must stay bounded too (a Batch hands its running
// children over instead of waiting for them, so this floor pays a small drain per run).
// Like a Batch, it has at most ceilingStartBurst children asked of the server and not yet
// started, so that its task times have a Batch's shape.
func childBatchWorkflow(ctx workflow.Context, n, width, perRun int, d workflows.Durations) (workflows.Durations, error) {
	this := n
	if perRun > 0 && n > perRun {
		this = perRun
	}
	running, starting, closed := 0, 0, 0
	var failed error
	for range this {
		if err := workflow.Await(ctx, func() bool { return running < width && starting < ceilingStartBurst }); err != nil {
			return d, err
		}
		running++
		starting++
		begin := workflow.Now(ctx)
		fut := workflow.ExecuteChildWorkflow(ctx, oneActivityWorkflow)
		workflow.Go(ctx, func(ctx workflow.Context) {
			_ = fut.GetChildWorkflowExecution().Get(ctx, nil)
			starting--
			if err := fut.Get(ctx, nil); err != nil && failed == nil {
				failed = err
			}
			d.Add(workflow.Now(ctx).Sub(begin))
			running--
			closed++
		})
	}
	if err := workflow.Await(ctx, func() bool { return closed == this }); err != nil {
		return d, err
	}
	if failed != nil || this == n {
		return d, failed
	}
	return d, workflow.NewContinueAsNewError(ctx, childBatchWorkflow, n-this, width, perRun, d)
}

// ceiling is what the engine gives a workflow shape on this server and machine.
type ceiling struct {
	p50, p99   time.Duration
	throughput float64 // workflows/s at benchConcurrency
}

// BenchmarkHotPath measures, in one process against one server, the engine's ceiling and
// subflow's run beside it, and reports subflow's figures as ratios to the ceiling measured
// in the same run:
//
//   - ceiling-empty, ceiling-activity: a workflow without activities and one with one empty
//     activity, on their own worker on the same client: sequential latency (p50, p99, start to
//     result) and throughput with 50 workflows in flight (wf/s).
//   - run: one scripted spawn run with a new root session (subflow.Start, then the result)
//     and the same delegation directly on the in-process driver (direct-*); overhead-* is
//     their difference, overhead-p50-vs-activity its ratio to ceiling-activity's p50.
//   - batch: three throughputs measured one after the other, so that all three see the same
//     server (its store grows with every run): the one-activity workflow again
//     (ceiling-activity-wf/s), the engine's floor for a batch — a bare workflow running the
//     one-activity workflow as child workflows, 50 at a time (ceiling-children-runs/s) — and
//     a Batch of scripted spawn runs, 50 at a time (runs/s); vs-activity and vs-children
//     are runs/s over the first two.
//
// SUBFLOW_BENCH_SEQUENTIAL and SUBFLOW_BENCH_RUNS change the sizes (200, 1,000).
// SUBFLOW_BENCH_TEMPORAL_ADDRESS runs it against another server (bench/cli-devserver.sh).
//
//	go test -run '^$' -bench HotPath -benchtime 1x -timeout 30m ./bench/
func BenchmarkHotPath(b *testing.B) {
	seq := envCount("SUBFLOW_BENCH_SEQUENTIAL", hotPathSequential)
	runs := envCount("SUBFLOW_BENCH_RUNS", hotPathRuns)
	w := worker.New(env.c, ceilingQueue, worker.Options{})
	w.RegisterWorkflow(emptyWorkflow)
	w.RegisterWorkflow(oneActivityWorkflow)
	w.RegisterWorkflow(childBatchWorkflow)
	w.RegisterActivity(emptyActivity)
	require.NoError(b, w.Start())
	defer w.Stop()

	var empty, activity ceiling
	b.Run("ceiling-empty", func(b *testing.B) { empty = measureCeiling(b, emptyWorkflow, seq, runs) })
	b.Run("ceiling-activity", func(b *testing.B) { activity = measureCeiling(b, oneActivityWorkflow, seq, runs) })
	b.Run("run", func(b *testing.B) {
		var lat, direct []time.Duration
		for b.Loop() {
			lat = append(lat, sequentialRuns(b, seq)...)
			direct = append(direct, directRuns(b, seq)...)
		}
		reportPercentiles(b, lat, "")
		reportPercentiles(b, direct, "direct-")
		over50, over99 := percentile(lat, 50)-percentile(direct, 50), percentile(lat, 99)-percentile(direct, 99)
		b.ReportMetric(ms(over50), "overhead-p50-ms")
		b.ReportMetric(ms(over99), "overhead-p99-ms")
		if activity.p50 > 0 {
			b.ReportMetric(float64(over50)/float64(activity.p50), "overhead-p50-vs-activity")
		}
		if empty.p50 > 0 {
			b.ReportMetric(float64(over50)/float64(empty.p50), "overhead-p50-vs-empty")
		}
	})
	b.Run("batch", func(b *testing.B) {
		var oneActivity, children, batch time.Duration
		for b.Loop() {
			oneActivity += concurrently(runs, benchConcurrency, func() { runCeiling(b, oneActivityWorkflow) })
			children += runCeiling(b, childBatchWorkflow, runs, benchConcurrency, 0, workflows.Durations{})
			batch += runBatch(b, subagent.ProviderSpawn, runs)
		}
		perSec := func(d time.Duration) float64 { return float64(runs*b.N) / d.Seconds() }
		b.ReportMetric(perSec(oneActivity), "ceiling-activity-wf/s")
		b.ReportMetric(perSec(children), "ceiling-children-runs/s")
		b.ReportMetric(perSec(batch), "runs/s")
		b.ReportMetric(perSec(batch)/perSec(oneActivity), "vs-activity")
		b.ReportMetric(perSec(batch)/perSec(children), "vs-children")
	})
}

// runCeiling runs workflow fn with args on the ceiling's worker and returns the time from
// its start to its result.
func runCeiling(b *testing.B, fn any, args ...any) time.Duration {
	return runCeilingInto(b, nil, fn, args...)
}

// runCeilingInto is runCeiling that also decodes the workflow's result into out.
func runCeilingInto(b *testing.B, out any, fn any, args ...any) time.Duration {
	ctx := context.Background()
	begin := time.Now()
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: ceilingQueue}, fn, args...)
	require.NoError(b, err)
	require.NoError(b, run.Get(ctx, out))
	return time.Since(begin)
}

// measureCeiling runs fn seq times one after the other, then runs times benchConcurrency
// at a time, and reports p50-ms, p99-ms and wf/s.
func measureCeiling(b *testing.B, fn any, seq, runs int) ceiling {
	one := func() time.Duration { return runCeiling(b, fn) }
	var c ceiling
	for b.Loop() {
		lat := make([]time.Duration, seq)
		for i := range lat {
			lat[i] = one()
		}
		reportPercentiles(b, lat, "")
		c.p50, c.p99 = percentile(lat, 50), percentile(lat, 99)

		elapsed := concurrently(runs, benchConcurrency, func() { one() })
		c.throughput = float64(runs) / elapsed.Seconds()
		b.ReportMetric(c.throughput, "wf/s")
	}
	return c
}

// concurrently calls fn n times, at most width at once, and returns the wall time.
func concurrently(n, width int, fn func()) time.Duration {
	begin := time.Now()
	todo := make(chan struct{}, n)
	for range n {
		todo <- struct{}{}
	}
	close(todo)
	var wg sync.WaitGroup
	for range width {
		wg.Go(func() {
			for range todo {
				fn()
			}
		})
	}
	wg.Wait()
	return time.Since(begin)
}

// sequentialRuns runs n scripted spawn runs with a new root session through StartSubagent,
// one after the other, and returns each one's time from the start to its outcome.
func sequentialRuns(b *testing.B, n int) []time.Duration {
	ctx := context.Background()
	dir := b.TempDir()
	script := doneScript(b, dir)
	lat := make([]time.Duration, n)
	for i := range lat {
		begin := time.Now()
		_, run, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: env.queue, Input: rootInput(subagent.ProviderSpawn, dir, script)})
		require.NoError(b, err)
		var out workflows.Outcome
		require.NoError(b, run.Get(ctx, &out))
		lat[i] = time.Since(begin)
		require.Equal(b, subagent.StopCompleted, out.Result.StopReason)
	}
	return lat
}

// directRuns runs the same delegation as sequentialRuns n times on the in-process driver
// with a file session store, without Temporal.
func directRuns(b *testing.B, n int) []time.Duration {
	ctx := context.Background()
	dir := b.TempDir()
	script := doneScript(b, dir)
	store, err := filestore.New(filepath.Join(dir, "sessions"))
	require.NoError(b, err)
	defer store.Close()
	models := &model.Registry{}
	models.Register(model.ProviderScripted, model.NewScripted())
	reg := &tools.Registry{}
	require.NoError(b, tools.RegisterBuiltins(reg))
	host, err := inprocess.NewHost(inprocess.Options{Store: store, Models: models, Tools: reg})
	require.NoError(b, err)
	route := session.Route{Provider: model.ProviderScripted, Model: script}

	lat := make([]time.Duration, n)
	for i := range lat {
		begin := time.Now()
		root := uuid.NewString()
		require.NoError(b, store.Create(ctx, session.Header{ID: root, Cwd: dir, Route: &route}))
		run, err := host.Start(ctx, subagent.Request{
			Prompt: []session.Block{session.Text("go")},
			Parent: subagent.ParentRef{SessionID: root},
		}, inprocess.StartOptions{Provider: subagent.ProviderSpawn})
		require.NoError(b, err)
		res, err := run.Result(ctx)
		require.NoError(b, err)
		require.NoError(b, run.Dispose(ctx))
		lat[i] = time.Since(begin)
		require.Equal(b, subagent.StopCompleted, res.StopReason)
	}
	return lat
}

// doneScript writes a script of one response, "done", and returns its path.
func doneScript(b *testing.B, dir string) string {
	path := filepath.Join(dir, "done.json")
	require.NoError(b, os.WriteFile(path, []byte(`{"responses": [{"text": "done"}]}`), 0o644))
	return path
}

// percentile returns the p-th percentile of lat (sorting it).
func percentile(lat []time.Duration, p int) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, len(lat)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
