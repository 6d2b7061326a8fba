package e2e

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// BenchmarkModelAdmission measures the cluster-wide model admission (docs/benchmarks.md,
// "Admission that scales"), with two worker processes serving the limiter:
//
//   - ceiling: 50 callers in the benchmark process take and give back permits of one
//     ModelAdmission as fast as it grants them, each acquire an Update-with-Start and each
//     release a signal, a refused acquire sent again after 200–1,000 ms as workers do:
//     acquires/s and the p50/p99 acquire latency (refusals included).
//   - batch: a batch of 400 one-request openai-compatible tasks at concurrency 50 against a
//     loopback server, without --model-concurrency and with a limit that never binds (1,000),
//     alternating off, on, off, on: runs/s of each and on/off.
func BenchmarkModelAdmission(b *testing.B) {
	b.Run("ceiling", func(b *testing.B) {
		for b.Loop() {
			admissionCeiling(b, 50, 1000)
		}
	})
	b.Run("batch", func(b *testing.B) {
		for b.Loop() {
			var off, on []float64
			for range 2 {
				off = append(off, admissionBatch(b, false, 400))
				on = append(on, admissionBatch(b, true, 400))
			}
			mean := func(v []float64) float64 { return (v[0] + v[1]) / 2 }
			b.ReportMetric(mean(off), "off-runs/s")
			b.ReportMetric(mean(on), "on-runs/s")
			b.ReportMetric(mean(on)/mean(off), "on/off")
			b.Logf("runs/s off %v, on %v", off, on)
		}
	})
}

func admissionCeiling(b *testing.B, callers, acquires int) {
	f := newFaultEnv(b, "")
	f.startWorker()
	f.startWorker()
	provider := "ceiling-" + uuid.NewString()
	id := workflows.AdmissionWorkflowID(provider)
	defer func() { _ = env.c.TerminateWorkflow(context.Background(), id, "", "benchmark over") }()
	ctx, cancel := context.WithTimeout(context.Background(), batchLimit)
	defer cancel()
	acquire := func() (string, int, error) {
		for refused := 0; ; refused++ {
			op := f.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
				ID: id, TaskQueue: f.taskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			}, workflows.AdmissionWorkflowName, workflows.AdmissionInput{Provider: provider, Limit: 1000})
			h, err := f.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
				StartWorkflowOperation: op,
				UpdateOptions: client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateAcquire,
					WaitForStage: client.WorkflowUpdateStageAccepted},
			})
			var permit string
			if err == nil {
				err = h.Get(ctx, &permit)
			}
			if err == nil {
				return permit, refused, nil
			}
			if ctx.Err() != nil {
				return "", refused, ctx.Err()
			}
			time.Sleep(200*time.Millisecond + time.Duration(rand.Int64N(int64(800*time.Millisecond))))
		}
	}
	// One acquire first, so the limiter runs before the clock starts.
	permit, _, err := acquire()
	require.NoError(b, err)
	require.NoError(b, f.c.SignalWorkflow(ctx, id, "", workflows.SignalRelease, permit))

	var left atomic.Int64
	left.Store(int64(acquires))
	var mu sync.Mutex
	var lat []time.Duration
	var refusals int
	var wg sync.WaitGroup
	begin := time.Now()
	for range callers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				permit, refused, err := acquire()
				if err != nil {
					b.Error(err)
					return
				}
				took := time.Since(t0)
				if err := f.c.SignalWorkflow(ctx, id, "", workflows.SignalRelease, permit); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, took)
				refusals += refused
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "acquires/s")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(float64(refusals)/float64(len(lat)), "refusals/acquire")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// admissionBatch runs n one-request tasks at concurrency 50 on two fresh worker processes,
// admitted (a limit of 1,000 that never binds) or not, and returns runs/s.
func admissionBatch(b *testing.B, admitted bool, n int) float64 {
	api := newLimitedAPIHolding(b, 1<<20, time.Millisecond)
	f := newFaultEnv(b, "")
	if admitted {
		terminateAdmission(b, model.ProviderOpenAICompatible)
		f.extraArgs = []string{"--model-concurrency", model.ProviderOpenAICompatible + "=1000"}
	}
	f.extraEnv = []string{"OPENAI_BASE_URL=" + api.srv.URL, "OPENAI_API_KEY=test-key"}
	w1, w2 := f.startWorker(), f.startWorker()
	defer w1.kill()
	defer w2.kill()
	dir := b.TempDir()
	tasks := make([]workflows.Task, n)
	for i := range tasks {
		tasks[i] = workflows.Task{Task: "say ok", Cwd: dir, ModelProvider: model.ProviderOpenAICompatible, Model: "m"}
	}
	batchID := "batch-" + uuid.NewString()
	ctx, cancel := context.WithTimeout(context.Background(), batchLimit)
	defer cancel()
	begin := time.Now()
	run, err := f.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: f.taskQueue},
		workflows.BatchWorkflowName, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Total: n, Concurrency: 50, TaskQueue: f.taskQueue})
	require.NoError(b, err)
	var sum workflows.BatchSummary
	require.NoError(b, run.Get(ctx, &sum))
	elapsed := time.Since(begin)
	require.Equal(b, n, sum.ByStopReason[subagent.StopCompleted], "%+v", sum)
	return float64(n) / elapsed.Seconds()
}
