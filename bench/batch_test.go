// Package bench measures subflow end to end on the embedded Temporal server. Its figures
// are recorded in docs/benchmarks.md; BenchmarkBatch10k and BenchmarkInteractiveLatency also
// append theirs to bench/results when asked (SUBFLOW_BENCH_RECORD=1), which the pictures
// there are drawn from (package figures).
package bench

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/devserver"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// Batch sizes and concurrency of BenchmarkBatchThroughput. SUBFLOW_BENCH_RUNS overrides the
// number of runs of every sub-benchmark.
const (
	spawnRuns        = 1000
	sdkRuns          = 200
	benchConcurrency = 50
)

// externalServerEnv names a frontend address (host:port, namespace "default") to measure
// instead of the embedded server.
const externalServerEnv = "SUBFLOW_BENCH_TEMPORAL_ADDRESS"

// dbFileEnv names a SQLite file for the embedded server to keep its store in, as `starter dev
// --db` does, instead of memory.
const dbFileEnv = "SUBFLOW_BENCH_DB"

var env struct {
	c   client.Client
	tmp string
	// addr and namespace reach the embedded server from other processes.
	addr, namespace string
	// queue is the task queue of the benchmarks' subflow worker: workflows.TaskQueue on the
	// embedded server, one of its own on another server. A deployed server's
	// workflows.TaskQueue may have a current Worker Deployment version (deploy/local-cluster
	// sets one), which sends every new run to that version's workers and none to this
	// unversioned worker.
	queue string
}

func TestMain(m *testing.M) {
	// The benchmark binary is also the sdk child command.
	app.MaybeRunChildRuntime()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "subflow-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	env.tmp = tmp
	if addr := os.Getenv(externalServerEnv); addr != "" {
		// Another server, e.g. the stock CLI dev server of bench/cli-devserver.sh, with
		// the search attributes of workflows.SearchAttributes registered. Its client logs
		// warnings only, as the embedded server's does: the SDK's default logger would write
		// a line per workflow and activity of the ceilings' worker.
		env.addr, env.namespace = addr, "default"
		env.queue = fmt.Sprintf("bench-%d", time.Now().UnixNano())
		env.c, err = subflow.Dial(ctx, client.Options{HostPort: addr, Namespace: env.namespace,
			Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	} else {
		var srv *devserver.Server
		srv, err = devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI, LogLevel: "error",
			DBFile: os.Getenv(dbFileEnv)})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: start server:", err)
			return 1
		}
		defer srv.Stop()
		env.addr, env.namespace = srv.FrontendAddr(), srv.Namespace()
		env.c, err = srv.NewClient(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: client:", err)
		return 1
	}
	defer env.c.Close()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.queue = cmp.Or(env.queue, workflows.TaskQueue)
	w, cleanup, err := app.New(env.c, app.Options{
		TaskQueue:   env.queue,
		SessionRoot: filepath.Join(tmp, "sessions"),
		SDKCommand:  exe,
		SDKArgs:     []string{app.ChildRuntimeArg},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: worker:", err)
		return 1
	}
	defer cleanup()
	if err := w.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: worker:", err)
		return 1
	}
	defer w.Stop()
	return m.Run()
}

// BenchmarkBatchThroughput runs batches of scripted runs (one response each, new root
// session per task) through the Batch workflow on the embedded server with one in-process
// worker, and reports runs/s from the batch's start to its summary: 1,000 spawn runs, and 200
// sdk runs (one child process each). Run it once per size:
//
//	go test -run '^$' -bench BatchThroughput -benchtime 1x -timeout 30m ./bench/
func BenchmarkBatchThroughput(b *testing.B) {
	for _, c := range []struct {
		provider string
		runs     int
	}{{subagent.ProviderSpawn, spawnRuns}, {subagent.ProviderSDK, sdkRuns}} {
		runs := c.runs
		if n, err := fmt.Sscan(os.Getenv("SUBFLOW_BENCH_RUNS"), &runs); n != 1 || err != nil {
			runs = c.runs
		}
		b.Run(fmt.Sprintf("%s-%d", c.provider, runs), func(b *testing.B) {
			var elapsed time.Duration
			for b.Loop() {
				elapsed += runBatch(b, c.provider, runs)
			}
			b.ReportMetric(float64(runs*b.N)/elapsed.Seconds(), "runs/s")
		})
	}
}

// runBatch runs one batch of n tasks of provider and returns its wall time.
func runBatch(b *testing.B, provider string, n int) time.Duration {
	dir := b.TempDir()
	scriptPath := filepath.Join(dir, "script.json")
	require.NoError(b, os.WriteFile(scriptPath, []byte(`{"responses": [{"text": "done"}]}`), 0o644))
	tasks := make([]workflows.Task, n)
	for i := range tasks {
		tasks[i] = workflows.Task{Provider: provider, Task: "go", Cwd: dir,
			ModelProvider: model.ProviderScripted, Model: scriptPath}
	}
	id := "bench-" + uuid.NewString()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	begin := time.Now()
	run := startPagedBatch(ctx, b, id, env.queue, tasks, 0)
	var sum workflows.BatchSummary
	require.NoError(b, run.Get(ctx, &sum))
	elapsed := time.Since(begin)
	require.True(b, sum.Completed(), "%+v", sum)
	b.ReportMetric(float64(sum.Durations.Percentile(50).Milliseconds()), "task-p50-ms")
	b.ReportMetric(float64(sum.Durations.Percentile(99).Milliseconds()), "task-p99-ms")
	b.ReportMetric(float64(sum.Runs), "workflow-runs")
	return elapsed
}

// startPagedBatch starts a Batch of tasks as `starter batch` does: the first tasks inline,
// the others in pages by Update. continueAsNewAfter 0 keeps the default.
func startPagedBatch(ctx context.Context, b *testing.B, id, queue string, tasks []workflows.Task, continueAsNewAfter int) client.WorkflowRun {
	inline, paged := subflow.SplitInline(tasks)
	in := workflows.BatchInput{BatchID: id, Tasks: inline, Total: len(tasks), Concurrency: benchConcurrency,
		TaskQueue: queue, ContinueAsNewAfter: continueAsNewAfter}
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue},
		workflows.BatchWorkflowName, in)
	require.NoError(b, err)
	require.NoError(b, subflow.SendTaskPages(ctx, env.c, id, len(inline), paged))
	return run
}
