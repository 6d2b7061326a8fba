package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/workflows"
)

// batch10kRuns is the size of BenchmarkBatch10k; SUBFLOW_BENCH_RUNS overrides it.
const batch10kRuns = 10_000

// BenchmarkBatch10k runs a 10,000-task batch as users run it: `starter batch` (its own
// process) hands the tasks to a Batch on the embedded server and follows it to its end,
// and the worker program (its own process) runs them. It reports runs/s from the starter's
// start to its exit, the batch's history bytes per continue-as-new run (mean and largest),
// and the peak RSS of the worker and of the starter (VmRSS sampled every 100 ms):
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
	require.NoError(b, os.WriteFile(scriptPath, []byte(`{"responses": [{"text": "done"}]}`), 0o644))
	var tasks bytes.Buffer
	for range runs {
		line, err := json.Marshal(workflows.Task{Task: "go", Cwd: dir, ModelProvider: model.ProviderScripted, Model: scriptPath})
		require.NoError(b, err)
		tasks.Write(line)
		tasks.WriteByte('\n')
	}
	tasksFile := filepath.Join(dir, "tasks.jsonl")
	require.NoError(b, os.WriteFile(tasksFile, tasks.Bytes(), 0o644))
	procEnv := append(os.Environ(), "TEMPORAL_ADDRESS="+env.addr, "TEMPORAL_NAMESPACE="+env.namespace)

	for b.Loop() {
		queue := "bench-10k-" + fmt.Sprint(time.Now().UnixNano())
		w := exec.Command(bins["worker"], "--task-queue", queue, "--session-root", filepath.Join(dir, "sessions"), "--log-level", "warn")
		w.Env = procEnv
		require.NoError(b, w.Start())

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
		starterMB := starterPeak()
		workerMB := workerPeak()
		_ = w.Process.Signal(syscall.SIGTERM)
		_ = w.Wait()
		require.NoError(b, err, "starter: %s", stderr.String())

		b.ReportMetric(float64(runs)/elapsed.Seconds(), "runs/s")
		b.ReportMetric(workerMB, "worker-peak-rss-MB")
		b.ReportMetric(starterMB, "starter-peak-rss-MB")
		mean, largest, n := historyBytes(b, id)
		b.ReportMetric(mean/1024, "history-KB/run")
		b.ReportMetric(largest/1024, "history-max-KB/run")
		b.ReportMetric(float64(n), "workflow-runs")
	}
	b.ReportMetric(0, "ns/op")
}

// peakRSS samples the RSS of process pid every 100 ms until the returned function is
// called, which returns the largest sample in MB.
func peakRSS(pid int) func() float64 {
	done := make(chan struct{})
	result := make(chan float64, 1)
	go func() {
		var peak int64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if kb, err := rssKB(pid); err == nil {
				peak = max(peak, kb)
			}
			select {
			case <-done:
				result <- float64(peak) / 1024
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		return <-result
	}
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
