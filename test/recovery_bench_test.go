package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// BenchmarkWorkerKillRecovery measures how long a spawn run stands still after its worker
// process is SIGKILLed mid-stream: from the kill until the retried drive, on a second worker
// process started right after the kill, appends its first event to the child's log. It is
// dominated by workflows.HeartbeatTimeout (3 s) plus the retry's first interval (1 s); the
// killed worker's session lease (activities.LeaseTTL, the same 3 s) has expired by then.
// Run with -benchtime=Nx; it reports p50-ms and max-ms.
func BenchmarkWorkerKillRecovery(b *testing.B) {
	var took []time.Duration
	for b.Loop() {
		f := newFaultEnv(b, "")
		store := f.openStore()
		dir := b.TempDir()
		w1 := f.startWorker()
		pub, run := f.start(rootInput(subagent.ProviderSpawn, dir, slowScript(b, dir), "stream slowly"))
		pendingActivity(b, f.c, run, workflows.ActivityDrive, func(_ enumsState, p workflows.Progress) bool {
			return p.Tail != ""
		})
		w1.kill()
		killed := time.Now()
		_, events, err := store.Load(context.Background(), pub.ChildID)
		require.NoError(b, err)
		f.startWorker()
		require.Eventually(b, func() bool {
			_, now, err := store.Load(context.Background(), pub.ChildID)
			return err == nil && len(now) > len(events)
		}, 2*waitLimit, 20*time.Millisecond)
		took = append(took, time.Since(killed))
		require.NoError(b, f.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
		outcome(b, run)
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}
