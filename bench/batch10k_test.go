package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/bench/figures"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/workflows"
)

// batch10kRuns is the size of BenchmarkBatch10k; SUBFLOW_BENCH_RUNS overrides it.
// batch10kReference is the smaller batch it runs first, on the same server, as the reference
// of its ratios.
const (
	batch10kRuns      = 10_000
	batch10kReference = 1_000
)

// BenchmarkBatch10k runs a 10,000-task batch as users run it: `starter batch` (its own
// process) hands the tasks to a Batch on the embedded server and follows it to its end,
// writing every result to --out, and the worker program (its own process) runs them. A
// 1,000-task batch runs first on the same server, and the ratios of the two are the cost
// curve: runs/s and the starter's peak RSS at 10,000 (or SUBFLOW_BENCH_RUNS) over 1,000 (the
// starter streams its tasks file in and the results out, each answer 2 KiB, so its memory
// should not grow with the batch; a test cannot assert a memory ratio on a shared machine). Beside each size runs the engine's own
// ceiling for it on the same server: a bare workflow running as many one-activity child
// workflows, 50 at a time, continuing as new every DefaultContinueAsNewAfter children
// (ceiling-children-runs/s-*, and runs/s-vs-ceiling-* the batch's share of it; ceiling-big-vs-ref
// is how much of the slowdown with size is the engine's; ceiling-task-p50-ms-*,
// ceiling-task-p99-ms-* and ceiling-task-p99-vs-p50-* its children's times, the reference of
// the batch's task latency). It reports, for each size, runs/s from the
// starter's start to its exit, the batch's history bytes per continue-as-new run (mean and
// largest), the peak RSS of the worker and of the starter (VmHWM, read every 100 ms) and of
// their anonymous memory (RssAnon, *-peak-anon-MB-*: the RSS less their binaries' pages), and a
// task's latency in the batch, p50, p99 and their ratio (task-p99-vs-p50-*). On the embedded
// server it also reports the server's peak RSS after each size (server-peak-rss-MB-*, the
// bench's own process, which the server shares with the ceiling's worker); SUBFLOW_BENCH_DB
// keeps that server's store in a SQLite file, as `starter dev --db` does (recorded as server
// embedded-file). SUBFLOW_BENCH_PROFILES=DIR has the worker serve its profiles (--pprof-addr)
// and saves its heap profile into DIR each minute and at the end (heapProfiles);
// SUBFLOW_BENCH_CEILING=off skips the ceilings. With
// SUBFLOW_BENCH_RECORD=1 it appends runs/s, the ceiling and the peak RSS
// of both sizes to bench/results/cost-curve.tsv and redraws the cost curve's pictures in
// docs/img:
//
//	go test -run '^$' -bench Batch10k -benchtime 1x -timeout 60m ./bench/
func BenchmarkBatch10k(b *testing.B) {
	runs := batch10kRuns
	if n, err := fmt.Sscan(os.Getenv("SUBFLOW_BENCH_RUNS"), &runs); n != 1 || err != nil {
		runs = batch10kRuns
	}
	dir := b.TempDir()
	bins := map[string]string{}
	for _, name := range []string{"worker", "starter"} {
		bins[name] = filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", bins[name], "github.com/subflow-dev/subflow/"+name).CombinedOutput()
		require.NoError(b, err, "build %s: %s", name, out)
	}
	scriptPath := filepath.Join(dir, "script.json")
	// A 2 KiB answer: a starter that held the results would grow by 20 MiB at 10,000 tasks
	// and 200 MiB at 100,000, which starter-rss-big-vs-ref would show.
	answer, err := json.Marshal(strings.Repeat("a", 2048))
	require.NoError(b, err)
	require.NoError(b, os.WriteFile(scriptPath, []byte(`{"responses": [{"text": `+string(answer)+`}]}`), 0o644))
	w := worker.New(env.c, ceilingQueue, worker.Options{})
	w.RegisterWorkflow(oneActivityWorkflow)
	w.RegisterWorkflow(childBatchWorkflow)
	w.RegisterActivity(emptyActivity)
	require.NoError(b, w.Start())
	defer w.Stop()
	// SUBFLOW_BENCH_CEILING=off skips the ceilings, for a run that only measures memory: at
	// 100,000 tasks the ceiling takes 40 minutes more.
	withCeiling := os.Getenv("SUBFLOW_BENCH_CEILING") != "off"
	// ceilingRate runs the ceiling for n tasks: its runs/s and its children's durations.
	ceilingRate := func(n int) (float64, workflows.Durations) {
		var durations workflows.Durations
		if !withCeiling {
			return 0, durations
		}
		d := runCeilingInto(b, &durations, childBatchWorkflow, n, benchConcurrency, workflows.DefaultContinueAsNewAfter, durations)
		return float64(n) / d.Seconds(), durations
	}
	for b.Loop() {
		ref := starterBatch(b, bins, dir, scriptPath, batch10kReference)
		refCeiling, refCeilingDurations := ceilingRate(batch10kReference)
		refServerMB := serverPeakMB()
		big := starterBatch(b, bins, dir, scriptPath, runs)
		bigCeiling, bigCeilingDurations := ceilingRate(runs)
		if bigServerMB := serverPeakMB(); bigServerMB > 0 {
			b.ReportMetric(refServerMB, "server-peak-rss-MB-ref")
			b.ReportMetric(bigServerMB, "server-peak-rss-MB-big")
		}
		if withCeiling {
			b.ReportMetric(refCeiling, "ceiling-children-runs/s-ref")
			b.ReportMetric(bigCeiling, "ceiling-children-runs/s-big")
			b.ReportMetric(bigCeiling/refCeiling, "ceiling-big-vs-ref")
			b.ReportMetric(ref.runsPerSec/refCeiling, "runs/s-vs-ceiling-ref")
			b.ReportMetric(big.runsPerSec/bigCeiling, "runs/s-vs-ceiling-big")
			// The engine's own tail, the reference of task-p99-vs-p50: one parent starting
			// children at the batch's concurrency, without a drive.
			for _, c := range []struct {
				size string
				d    workflows.Durations
			}{{"ref", refCeilingDurations}, {"big", bigCeilingDurations}} {
				p50, p99 := c.d.Percentile(50), c.d.Percentile(99)
				b.ReportMetric(float64(p50.Milliseconds()), "ceiling-task-p50-ms-"+c.size)
				b.ReportMetric(float64(p99.Milliseconds()), "ceiling-task-p99-ms-"+c.size)
				b.ReportMetric(p99.Seconds()/p50.Seconds(), "ceiling-task-p99-vs-p50-"+c.size)
			}
		}
		for _, m := range []struct {
			size string
			r    batchRun
		}{{"ref", ref}, {"big", big}} {
			b.ReportMetric(m.r.runsPerSec, "runs/s-"+m.size)
			b.ReportMetric(m.r.workerMB, "worker-peak-rss-MB-"+m.size)
			b.ReportMetric(m.r.starterMB, "starter-peak-rss-MB-"+m.size)
			b.ReportMetric(m.r.workerAnonMB, "worker-peak-anon-MB-"+m.size)
			b.ReportMetric(m.r.starterAnonMB, "starter-peak-anon-MB-"+m.size)
			b.ReportMetric(m.r.historyKB, "history-KB/run-"+m.size)
			b.ReportMetric(m.r.historyMaxKB, "history-max-KB/run-"+m.size)
			b.ReportMetric(float64(m.r.workflowRuns), "workflow-runs-"+m.size)
			b.ReportMetric(float64(m.r.taskP50.Milliseconds()), "task-p50-ms-"+m.size)
			b.ReportMetric(float64(m.r.taskP99.Milliseconds()), "task-p99-ms-"+m.size)
			b.ReportMetric(m.r.taskP99.Seconds()/m.r.taskP50.Seconds(), "task-p99-vs-p50-"+m.size)
		}
		b.ReportMetric(big.runsPerSec/ref.runsPerSec, "runs/s-big-vs-ref")
		b.ReportMetric(big.starterMB/ref.starterMB, "starter-rss-big-vs-ref")
		b.ReportMetric(big.workerMB/ref.workerMB, "worker-rss-big-vs-ref")
		b.ReportMetric(big.workerAnonMB/ref.workerAnonMB, "worker-anon-big-vs-ref")
		b.ReportMetric(big.starterAnonMB/ref.starterAnonMB, "starter-anon-big-vs-ref")
		if !withCeiling {
			continue // a cost-curve row has its ceiling beside it
		}
		record(b, "BenchmarkBatch10k", func(s recordStamp) error {
			row := func(n int, r batchRun, ceiling float64) figures.CostRow {
				return figures.CostRow{Date: s.date, Server: s.server, Tasks: n, RunsPerSec: r.runsPerSec,
					CeilingRunsPerSec: ceiling, WorkerMB: r.workerMB, StarterMB: r.starterMB, Note: s.note}
			}
			return figures.AppendCost(filepath.Join(resultsDir, figures.CostFile),
				row(batch10kReference, ref, refCeiling), row(runs, big, bigCeiling))
		})
	}
	b.ReportMetric(0, "ns/op")
}

// serverPeakMB is the peak RSS (VmHWM) of the embedded server so far, which runs in this
// process beside the ceiling's worker, or 0 on an external server.
func serverPeakMB() float64 {
	if os.Getenv(externalServerEnv) != "" {
		return 0
	}
	kb, err := procStatusKB(0, "VmHWM")
	if err != nil {
		return 0
	}
	return float64(kb) / 1024
}

// batchRun is what starterBatch measured of one batch.
type batchRun struct {
	runsPerSec, workerMB, starterMB, historyKB, historyMaxKB float64
	// workerAnonMB, starterAnonMB are the peaks of the processes' anonymous memory
	// (RssAnon): their RSS less the pages of their binaries and other files they map.
	workerAnonMB, starterAnonMB float64
	workflowRuns                int
	// taskP50, taskP99 are the batch's own percentiles of a task's time from its start in
	// the batch to its result (BatchSummary.Durations).
	taskP50, taskP99 time.Duration
}

// starterBatch runs a batch of n scripted tasks through `starter batch --out` and a worker
// process of its own, and measures it.
func starterBatch(b *testing.B, bins map[string]string, dir, scriptPath string, n int) batchRun {
	var tasks bytes.Buffer
	for range n {
		line, err := json.Marshal(workflows.Task{Task: "go", Cwd: dir, ModelProvider: model.ProviderScripted, Model: scriptPath})
		require.NoError(b, err)
		tasks.Write(line)
		tasks.WriteByte('\n')
	}
	tasksFile := filepath.Join(dir, fmt.Sprintf("tasks-%d.jsonl", n))
	require.NoError(b, os.WriteFile(tasksFile, tasks.Bytes(), 0o644))
	procEnv := append(os.Environ(), "TEMPORAL_ADDRESS="+env.addr, "TEMPORAL_NAMESPACE="+env.namespace)

	queue := "bench-10k-" + fmt.Sprint(time.Now().UnixNano())
	// --gc-every 0: the hourly retention cleanup fires at an offset its queue's name fixes, so
	// it would land inside some measurements and not others and walk the whole store there.
	args := []string{"--task-queue", queue, "--session-root", filepath.Join(dir, "sessions"),
		"--log-level", "warn", "--gc-every", "0"}
	profileDir, profileAddr := os.Getenv("SUBFLOW_BENCH_PROFILES"), ""
	if profileDir != "" {
		profileAddr = freeAddr(b)
		args = append(args, "--pprof-addr", profileAddr)
	}
	w := exec.Command(bins["worker"], args...)
	w.Env = procEnv
	require.NoError(b, w.Start())
	stopProfiles := func() {}
	if profileDir != "" {
		stopProfiles = heapProfiles(b, profileAddr, filepath.Join(profileDir, fmt.Sprintf("worker-heap-%d", n)))
	}

	id := "bench-10k-" + fmt.Sprint(time.Now().UnixNano())
	s := exec.Command(bins["starter"], "batch", "--id", id, "--task-queue", queue,
		"--concurrency", fmt.Sprint(benchConcurrency), "--out", filepath.Join(dir, "results.jsonl"), tasksFile)
	s.Env, s.Dir = procEnv, dir
	var stderr bytes.Buffer
	s.Stderr = &stderr
	begin := time.Now()
	require.NoError(b, s.Start())
	workerPeak, starterPeak := peakRSS(w.Process.Pid), peakRSS(s.Process.Pid)
	err := s.Wait()
	elapsed := time.Since(begin)
	r := batchRun{runsPerSec: float64(n) / elapsed.Seconds()}
	var workerByMinute, starterByMinute []float64
	r.workerMB, r.workerAnonMB, workerByMinute = workerPeak()
	r.starterMB, r.starterAnonMB, starterByMinute = starterPeak()
	b.Logf("%d tasks: peak RSS in MB at the end of each minute (minute:MB), worker%s; starter%s",
		n, minutes(workerByMinute), minutes(starterByMinute))
	stopProfiles()
	_ = w.Process.Signal(syscall.SIGTERM)
	_ = w.Wait()
	require.NoError(b, err, "starter: %s", stderr.String())
	mean, largest, runs := historyBytes(b, id)
	r.historyKB, r.historyMaxKB, r.workflowRuns = mean/1024, largest/1024, runs
	var sum workflows.BatchSummary
	require.NoError(b, env.c.GetWorkflow(context.Background(), id, "").Get(context.Background(), &sum))
	r.taskP50, r.taskP99 = sum.Durations.Percentile(50), sum.Durations.Percentile(99)
	return r
}

// peakRSS reads the high-water mark of process pid's RSS (VmHWM) every 100 ms until the
// returned function is called, which returns the last one read in MB (the process's peak
// but for its last 100 ms), the largest anonymous memory (RssAnon) read, and the peak read
// at the end of each minute before: a peak reached in the first minutes and flat after is
// the hand-over's or the GC's, one that climbs to the end grows with the batch. The RSS
// counts the pages of the binary the process has touched (the starter's binary, which holds
// the embedded server, is 250 MB), which the kernel may drop at any time and which do not
// grow with the batch; RssAnon leaves them out. The kernel keeps no high-water mark of it, so
// a peak shorter than 100 ms may be missed.
func peakRSS(pid int) func() (peak, anon float64, byMinute []float64) {
	done := make(chan struct{})
	type result struct {
		peak, anon float64
		byMinute   []float64
	}
	out := make(chan result, 1)
	go func() {
		var r result
		var peak, anon int64
		begin := time.Now()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if kb, err := procStatusKB(pid, "VmHWM"); err == nil {
				peak = max(peak, kb)
			}
			if kb, err := procStatusKB(pid, "RssAnon"); err == nil {
				anon = max(anon, kb)
			}
			if time.Since(begin) >= time.Duration(len(r.byMinute)+1)*time.Minute {
				r.byMinute = append(r.byMinute, float64(peak)/1024)
			}
			select {
			case <-done:
				r.peak, r.anon = float64(peak)/1024, float64(anon)/1024
				out <- r
				return
			case <-t.C:
			}
		}
	}()
	return func() (float64, float64, []float64) {
		close(done)
		r := <-out
		return r.peak, r.anon, r.byMinute
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	addr := ln.Addr().String()
	require.NoError(b, ln.Close())
	return addr
}

// heapProfiles saves the heap profile the worker serves on addr (--pprof-addr), after a GC, at
// the end of each minute as prefix-MM.pb.gz and, when the returned function is called, as
// prefix-end.pb.gz: `go tool pprof -base prefix-01.pb.gz prefix-end.pb.gz` shows what the
// worker holds more at the end than after a minute.
func heapProfiles(b *testing.B, addr, prefix string) (stop func()) {
	require.NoError(b, os.MkdirAll(filepath.Dir(prefix), 0o755))
	save := func(name string) {
		resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
		if err != nil {
			b.Logf("heap profile %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %s", resp.Status)
		}
		if err == nil {
			err = os.WriteFile(prefix+"-"+name+".pb.gz", body, 0o644)
		}
		if err != nil {
			b.Logf("heap profile %s: %v", name, err)
		}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for minute := 1; ; minute++ {
			select {
			case <-done:
				save("end")
				return
			case <-t.C:
				save(fmt.Sprintf("%02d", minute))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// minutes formats peaks read at the end of each minute, in MB.
func minutes(mb []float64) string {
	var b strings.Builder
	for i, v := range mb {
		fmt.Fprintf(&b, " %d:%.0f", i+1, v)
	}
	return b.String()
}

// historyBytes returns the mean and largest history size of the runs of workflow id, and
// their number.
func historyBytes(b *testing.B, id string) (mean, largest float64, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var total int64
	var token []byte
	for {
		resp, err := env.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = %q", id), NextPageToken: token})
		require.NoError(b, err)
		for _, ex := range resp.GetExecutions() {
			d, err := env.c.DescribeWorkflowExecution(ctx, id, ex.GetExecution().GetRunId())
			require.NoError(b, err)
			size := d.GetWorkflowExecutionInfo().GetHistorySizeBytes()
			total += size
			largest = max(largest, float64(size))
			n++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	require.Positive(b, n, "no runs of %s listed", id)
	return float64(total) / float64(n), largest, n
}
