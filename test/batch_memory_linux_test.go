package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/workflows"
)

// TestBatchMemoryFlat runs a 1,000-task and a 10,000-task batch through `starter batch --out`
// with a worker process of each batch's own, and checks that the starter's peak RSS does not
// grow with the batch: at 10,000 tasks within 20 % of its figure at 1,000, and by less than
// half of what holding the results would add (each answer is 2 KiB: 20 MiB at 10,000). The
// worker's peaks are logged: they move with the moment of the largest workflow task, not the
// batch's size (its live heap stays flat), so they are the benchmark's to report
// (BenchmarkBatch10k). The peaks are the kernel's high-water mark of each process (VmHWM),
// read until it exits: getrusage's ru_maxrss would not do, as it keeps the RSS of the test
// process that forked it.
func TestBatchMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 11,000 delegations")
	}
	f := newFaultEnv(t, "")
	dir := t.TempDir()
	wantOutput := strings.Repeat("a", 2048)
	answer, err := json.Marshal(wantOutput)
	require.NoError(t, err)
	scriptPath := script(t, dir, `{"text": `+string(answer)+`}`)

	type peaks struct{ starterMB, workerMB float64 }
	batch := func(n int) peaks {
		var tasks strings.Builder
		for i := range n {
			line, err := json.Marshal(workflows.Task{Task: fmt.Sprintf("task %d", i), Cwd: dir,
				ModelProvider: model.ProviderScripted, Model: scriptPath})
			require.NoError(t, err)
			tasks.Write(line)
			tasks.WriteByte('\n')
		}
		tasksFile := filepath.Join(dir, fmt.Sprintf("tasks-%d.jsonl", n))
		require.NoError(t, os.WriteFile(tasksFile, []byte(tasks.String()), 0o644))
		outFile := filepath.Join(dir, fmt.Sprintf("results-%d.jsonl", n))

		w := f.startWorker("--gc-every", "0", "--log-level", "warn")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		cmd, stdout, stderr := starterCmd(ctx, dir, "batch", "--task-queue", f.taskQueue,
			"--concurrency", "50", "--out", outFile, tasksFile)
		begin := time.Now()
		require.NoError(t, cmd.Start())
		starterPeak := peakHWM(cmd.Process.Pid)
		code := exitCode(t, cmd.Wait())
		p := peaks{starterMB: starterPeak()}
		require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
		t.Logf("%d tasks in %v", n, time.Since(begin).Round(time.Second))
		workerKB, err := procStatusKB(w.pid(), "VmHWM")
		require.NoError(t, err)
		p.workerMB = float64(workerKB) / 1024
		w.kill()

		// Every result, in task order.
		out, err := os.Open(outFile)
		require.NoError(t, err)
		defer out.Close()
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		lines := 0
		for sc.Scan() {
			var r workflows.BatchResult
			require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
			require.Equal(t, lines, r.Index, "results in task order")
			require.Equal(t, wantOutput, r.Output, "task %d", r.Index)
			lines++
		}
		require.NoError(t, sc.Err())
		require.Equal(t, n, lines, "one result per task")

		return p
	}

	ref := batch(1_000)
	big := batch(10_000)
	t.Logf("peak RSS at 1,000 / 10,000 tasks: starter %.1f / %.1f MB (%.2f), worker %.1f / %.1f MB (%.2f)",
		ref.starterMB, big.starterMB, big.starterMB/ref.starterMB, ref.workerMB, big.workerMB, big.workerMB/ref.workerMB)
	assert.LessOrEqual(t, big.starterMB, 1.2*ref.starterMB, "the starter's peak RSS grows with the batch")
	heldMB := float64(9_000*len(wantOutput)) / (1 << 20) // the 9,000 more answers
	assert.Less(t, big.starterMB-ref.starterMB, heldMB/2, "the starter's peak RSS grows with the results")
}

// peakHWM reads the high-water mark of process pid's resident set (VmHWM) every 20 ms
// until the returned function is called, which returns the last one read, in MB. The mark
// only grows, so the last read before the process exits is its peak but for those 20 ms.
func peakHWM(pid int) func() float64 {
	done := make(chan struct{})
	result := make(chan float64, 1)
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if kb, err := procStatusKB(pid, "VmHWM"); err == nil {
				peak = max(peak, kb)
			}
			select {
			case <-done:
				result <- float64(peak) / 1024
				return
			case <-tick.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		return <-result
	}
}

// procStatusKB returns a field of /proc/<pid>/status given in kB (VmHWM, VmRSS).
func procStatusKB(pid int, field string) (int64, error) {
	p := fmt.Sprintf("/proc/%d/status", pid)
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, p)
}
