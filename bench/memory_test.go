package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
)

// defaultInFlight is the number of in-flight runs of BenchmarkWorkerMemory;
// SUBFLOW_BENCH_INFLIGHT overrides it.
const defaultInFlight = 200

// clientConcurrency bounds the concurrent client calls (starts, status polls, cancels) of
// BenchmarkWorkerMemory.
const clientConcurrency = 20

// settle is how long BenchmarkWorkerMemory lets a worker run before reading its memory.
const settle = 3 * time.Second

// BenchmarkWorkerMemory measures the memory a worker holds per in-flight in-process (spawn)
// run: it starts the runs with a script that streams for a minute, waits until every one
// streams, reads the memory, then cancels them all and checks they end aborted.
//
//   - worker-process: the worker program (./worker) in its own process against the embedded
//     server, so that its RSS (VmRSS of /proc/<pid>/status) is the worker's alone. Its Go
//     heap is the live heap of its latest GC (GODEBUG=gctrace=1), in whole MB.
//   - benchmark-process: the in-process worker of this benchmark; RSS and live heap (after
//     runtime.GC) then include the embedded server's share of the runs.
//
// Reported: rss-before-MB, rss-MB, MB/run (RSS delta per run), heap-MB/run (Go heap delta
// per run) and heap-after-MB (the heap once the runs were cancelled). Run it once:
//
//	go test -run '^$' -bench WorkerMemory -benchtime 1x -timeout 30m ./bench/
func BenchmarkWorkerMemory(b *testing.B) {
	n := envCount("SUBFLOW_BENCH_INFLIGHT", defaultInFlight)
	b.Run(fmt.Sprintf("worker-process-%d", n), func(b *testing.B) {
		for b.Loop() {
			measureWorkerProcess(b, n)
		}
		b.ReportMetric(0, "ns/op")
	})
	b.Run(fmt.Sprintf("benchmark-process-%d", n), func(b *testing.B) {
		for b.Loop() {
			measureBenchmarkProcess(b, n)
		}
		b.ReportMetric(0, "ns/op")
	})
}

// measureWorkerProcess runs the worker program on its own task queue and measures it.
func measureWorkerProcess(b *testing.B, n int) {
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Minute)
	defer stop()
	dir := b.TempDir()
	bin := filepath.Join(dir, "worker")
	build := exec.Command("go", "build", "-o", bin, "github.com/subflow-dev/subflow/worker")
	out, err := build.CombinedOutput()
	require.NoError(b, err, "build worker: %s", out)

	queue := "bench-memory-" + uuid.NewString()
	w := exec.Command(bin, "--task-queue", queue, "--session-root", filepath.Join(dir, "sessions"), "--log-level", "warn")
	w.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+env.addr, "TEMPORAL_NAMESPACE="+env.namespace, "GODEBUG=gctrace=1")
	stderr, err := w.StderrPipe()
	require.NoError(b, err)
	require.NoError(b, w.Start())
	var heap gcHeap
	traced := make(chan struct{})
	go func() {
		defer close(traced)
		heap.follow(stderr)
	}()
	defer func() {
		_ = w.Process.Signal(syscall.SIGTERM)
		<-traced
		_ = w.Wait()
	}()

	warmUp(ctx, b, queue, dir)
	time.Sleep(settle)
	rss0, err := rssKB(w.Process.Pid)
	require.NoError(b, err)
	heap0 := heap.live.Load()

	runs := startInFlight(ctx, b, n, queue, dir)
	time.Sleep(settle)
	rss1, err := rssKB(w.Process.Pid)
	require.NoError(b, err)
	heap1 := heap.live.Load()

	cancelAll(ctx, b, runs)
	time.Sleep(settle)
	reportMemory(b, n, rss0, rss1, heap0, heap1, heap.live.Load())
}

// measureBenchmarkProcess runs the runs on this process's worker and measures this process.
func measureBenchmarkProcess(b *testing.B, n int) {
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Minute)
	defer stop()
	dir := b.TempDir()
	warmUp(ctx, b, env.queue, dir)
	time.Sleep(settle)
	heap0 := liveHeap()
	rss0, err := rssKB(0)
	require.NoError(b, err)

	runs := startInFlight(ctx, b, n, env.queue, dir)
	time.Sleep(settle)
	heap1 := liveHeap()
	rss1, err := rssKB(0)
	require.NoError(b, err)

	cancelAll(ctx, b, runs)
	time.Sleep(settle)
	reportMemory(b, n, rss0, rss1, heap0, heap1, liveHeap())
}

func reportMemory(b *testing.B, n int, rss0, rss1 int64, heap0, heap1, heapAfter int64) {
	const mb = 1 << 20
	b.ReportMetric(float64(rss0)/1024, "rss-before-MB")
	b.ReportMetric(float64(rss1)/1024, "rss-MB")
	b.ReportMetric(float64(rss1-rss0)/1024/float64(n), "MB/run")
	b.ReportMetric(float64(heap0)/mb, "heap-before-MB")
	b.ReportMetric(float64(heap1)/mb, "heap-MB")
	b.ReportMetric(float64(heap1-heap0)/mb/float64(n), "heap-MB/run")
	b.ReportMetric(float64(heapAfter)/mb, "heap-after-MB")
}

// liveHeap returns this process's live heap in bytes right after a full GC.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// warmUp runs a few short runs to completion on queue, so that what a worker sets up on its
// first runs is not counted per run.
func warmUp(ctx context.Context, b *testing.B, queue, dir string) {
	path := filepath.Join(dir, "done.json")
	require.NoError(b, os.WriteFile(path, []byte(`{"responses": [{"text": "done"}]}`), 0o644))
	for range 5 {
		_, run, err := subflow.Start(ctx, env.c, subflow.StartOptions{
			TaskQueue: queue, Input: rootInput(subagent.ProviderSpawn, dir, path)})
		require.NoError(b, err)
		require.NoError(b, run.Get(ctx, nil))
	}
}

// startInFlight starts n slow spawn runs on queue and returns once every one streams.
func startInFlight(ctx context.Context, b *testing.B, n int, queue, dir string) []slowRun {
	scriptPath := slowScript(b, dir)
	runs := make([]slowRun, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(clientConcurrency)
	for i := range runs {
		g.Go(func() error {
			r, err := startSlow(gctx, subagent.ProviderSpawn, queue, dir, scriptPath)
			runs[i] = r
			return err
		})
	}
	require.NoError(b, g.Wait())

	// Poll, round by round, the runs that do not stream yet.
	pending := runs
	for len(pending) > 0 {
		var mu sync.Mutex
		var next []slowRun
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(clientConcurrency)
		for _, r := range pending {
			g.Go(func() error {
				ok, err := streaming(gctx, r)
				if err == nil && !ok {
					mu.Lock()
					next = append(next, r)
					mu.Unlock()
				}
				return err
			})
		}
		require.NoError(b, g.Wait())
		pending = next
		if len(pending) > 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
	return runs
}

// cancelAll cancels the runs and checks that each ends Canceled with an aborted result.
func cancelAll(ctx context.Context, b *testing.B, runs []slowRun) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(clientConcurrency)
	for _, r := range runs {
		g.Go(func() error { return env.c.CancelWorkflow(gctx, r.run.GetID(), r.run.GetRunID()) })
	}
	require.NoError(b, g.Wait())
	g, gctx = errgroup.WithContext(ctx)
	for _, r := range runs {
		g.Go(func() error { return waitCancelled(gctx, r) })
	}
	require.NoError(b, g.Wait())
}

// gcHeap follows a Go program's GODEBUG=gctrace=1 output.
type gcHeap struct {
	live atomic.Int64 // live heap after the latest GC, in bytes
}

// gcLine matches the heap sizes of a gctrace line: "… 4->5->2 MB, …" (at GC start, at GC
// end, live after marking).
var gcLine = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// follow reads r until EOF.
func (h *gcHeap) follow(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if m := gcLine.FindStringSubmatch(sc.Text()); m != nil {
			live, _ := strconv.ParseInt(m[3], 10, 64)
			h.live.Store(live << 20)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}
