package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// BenchmarkOrchestrationOverhead measures one scripted spawn run (root session, publish, a
// one-response turn, result) through the StartSubagent workflow on the embedded server, and
// the same run directly on the in-process driver. The difference is what Temporal adds.
// Each reports its p50 and p99 latency (the workflow also until publication, what a starter
// waits for); run it with -benchtime 200x or more:
//
//	go test -run '^$' -bench OrchestrationOverhead -benchtime 200x ./test/
func BenchmarkOrchestrationOverhead(b *testing.B) {
	dir := b.TempDir()
	path := script(b, dir, `{"text": "done"}`)

	b.Run("workflow", func(b *testing.B) {
		var lat, pub []time.Duration
		for b.Loop() {
			begin := time.Now()
			_, run := start(b, rootInput(workflows.ProviderSpawn, dir, path, "go"))
			pub = append(pub, time.Since(begin))
			out, _ := outcome(b, run)
			lat = append(lat, time.Since(begin))
			require.Equal(b, subagent.StopCompleted, out.Result.StopReason)
		}
		reportPercentiles(b, lat, "")
		reportPercentiles(b, pub, "publish-")
	})

	b.Run("inprocess", func(b *testing.B) {
		ctx := context.Background()
		store, err := session.NewFileStore(b.TempDir())
		require.NoError(b, err)
		defer store.Close()
		models := &model.Registry{}
		models.Register(model.ProviderScripted, model.NewScripted())
		reg := &tools.Registry{}
		require.NoError(b, tools.RegisterBuiltins(reg))
		host, err := inprocess.NewHost(inprocess.Options{Store: store, Models: models, Tools: reg})
		require.NoError(b, err)
		route := session.Route{Provider: model.ProviderScripted, Model: path}

		var lat []time.Duration
		for b.Loop() {
			begin := time.Now()
			root := uuid.NewString()
			require.NoError(b, store.Create(ctx, session.Header{ID: root, Cwd: dir, Route: &route}))
			run, err := host.Start(ctx, subagent.Request{
				Prompt: []session.Block{session.Text("go")},
				Parent: subagent.ParentRef{SessionID: root},
			}, inprocess.StartOptions{Provider: inprocess.ProviderSpawn})
			require.NoError(b, err)
			res, err := run.Result(ctx)
			require.NoError(b, err)
			require.NoError(b, run.Dispose(ctx))
			lat = append(lat, time.Since(begin))
			require.Equal(b, subagent.StopCompleted, res.StopReason)
		}
		reportPercentiles(b, lat, "")
	})
}

// reportPercentiles reports the p50, p99 and maximum of lat in milliseconds, as
// <prefix>p50-ms, <prefix>p99-ms and <prefix>max-ms.
func reportPercentiles(b *testing.B, lat []time.Duration, prefix string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p int) float64 {
		i := min(len(lat)-1, len(lat)*p/100)
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(at(50), prefix+"p50-ms")
	b.ReportMetric(at(99), prefix+"p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, prefix+"max-ms")
}
