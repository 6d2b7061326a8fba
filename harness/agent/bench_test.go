package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
)

// noSync is a FileStore whose Sync does nothing, so the benchmark measures the loop and not
// the disk's fsync latency.
type noSync struct{ *filestore.Store }

func (noSync) Sync(context.Context, string) error { return nil }

// BenchmarkStep measures the loop's cost per step with the scripted model: one op is a turn
// of stepsPerTurn steps (a no-op tool call each, then a one-chunk answer) in a fresh session,
// so history length stays realistic. ns/step and allocs/step include the event encoding, the
// file store's write per event, and the scripted model itself.
func BenchmarkStep(b *testing.B) {
	for _, tc := range []struct {
		name string
		sync bool
	}{{"nosync", false}, {"fsync", true}} {
		b.Run(tc.name, func(b *testing.B) { benchSteps(b, tc.sync) })
	}
}

const stepsPerTurn = 10

func benchSteps(b *testing.B, fsync bool) {
	f := newFixture(b)
	if err := f.tools.Register(tools.Tool{
		Name: "noop", Parameters: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, tools.Env, tools.Call) (tools.Result, error) {
			return tools.TextResult("ok"), nil
		},
	}); err != nil {
		b.Fatal(err)
	}
	responses := make([]string, stepsPerTurn)
	for i := range stepsPerTurn - 1 {
		responses[i] = `{"text": "working", "toolCalls": [{"name": "noop"}]}`
	}
	responses[stepsPerTurn-1] = `{"text": "done"}`
	script := f.script(responses...)
	var store session.Store = noSync{f.store}
	if fsync {
		store = f.store
	}
	ctx := context.Background()
	var allocs uint64
	var ms runtime.MemStats
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		id := fmt.Sprintf("bench-%d", i)
		if err := f.store.Create(ctx, session.Header{ID: id, Cwd: f.cwd, Route: &session.Route{Provider: model.ProviderScripted, Model: script}}); err != nil {
			b.Fatal(err)
		}
		a, err := Open(ctx, Options{Store: store, SessionID: id, Models: f.models, Tools: f.tools,
			Preset: Preset{Tools: []string{"noop"}}})
		if err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		b.StartTimer()
		if _, err := a.Followup(ctx, []session.Block{session.Text("go")}); err != nil {
			b.Fatal(err)
		}
		if err := a.WhenIdle(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		allocs += ms.Mallocs - before
		if err := a.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	steps := float64(b.N * stepsPerTurn)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/steps, "ns/step")
	b.ReportMetric(float64(allocs)/steps, "allocs/step")
}
