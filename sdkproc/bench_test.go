package sdkproc

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/subflow-dev/subflow/subagent"
)

// BenchmarkScriptedRun measures one whole SDK run through the real child runtime on the
// scripted model: spawn, initialize, prompt, result, dispose (shutdown and reap). It reports
// the median as p50-ms.
func BenchmarkScriptedRun(b *testing.B) {
	cfg, req := agentConfig(b, `{"text": "benchmark answer", "chunks": 4}`)
	p, err := New(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	durations := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		r, err := p.StartRun(ctx, req, RunOptions{})
		if err != nil {
			b.Fatal(err)
		}
		res, _ := r.Result(ctx)
		if err := r.Dispose(ctx); err != nil {
			b.Fatal(err)
		}
		if res.StopReason != subagent.StopCompleted {
			b.Fatalf("stop reason %s", res.StopReason)
		}
		durations = append(durations, time.Since(start))
	}
	sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
	if len(durations) > 0 {
		b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
	}
}
