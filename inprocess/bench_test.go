package inprocess

import (
	"context"
	"runtime"
	"testing"

	"github.com/google/uuid"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// BenchmarkStartResult measures one spawn delegation, Start to Result, on the scripted
// model with a real FileStore. Compare with BenchmarkBareAgentTurn, the same turn without
// the driver: the difference is the driver's overhead per run.
func BenchmarkStartResult(b *testing.B) {
	f := newFixture(b)
	f.script(b, "child.json", `{"text": "ok"}`)
	parent := f.parent(b, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := f.host.Start(ctx, req, StartOptions{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := r.Result(ctx)
		if err != nil || res.StopReason != subagent.StopCompleted {
			b.Fatal(err, res.StopReason)
		}
		if err := r.Dispose(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareAgentTurn is the baseline of BenchmarkStartResult: create a session, open an
// agent, one turn, close.
func BenchmarkBareAgentTurn(b *testing.B) {
	f := newFixture(b)
	f.script(b, "child.json", `{"text": "ok"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		id := uuid.NewString()
		if err := f.store.Create(ctx, session.Header{ID: id, Cwd: f.cwd, Route: route("child.json")}); err != nil {
			b.Fatal(err)
		}
		a, err := agent.Open(ctx, agent.Options{Store: f.store, SessionID: id, Models: f.models, Tools: f.tools,
			Preset: f.presets[agent.DefaultPresetName]})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.Followup(ctx, []session.Block{session.Text("go")}); err != nil {
			b.Fatal(err)
		}
		if err := a.WhenIdle(ctx); err != nil {
			b.Fatal(err)
		}
		if err := a.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLiveChildMemory reports the heap held per live child: children started and
// waiting on their model.
func BenchmarkLiveChildMemory(b *testing.B) {
	const children = 50
	f := newFixture(b)
	f.script(b, "child.json", `{"text": "never", "delayMs": 600000}`)
	parent := f.parent(b, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	ctx := context.Background()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		runs := make([]*Run, children)
		for i := range runs {
			r, err := f.host.Start(ctx, req, StartOptions{})
			if err != nil {
				b.Fatal(err)
			}
			runs[i] = r
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/children, "heap-B/child")
		b.ReportMetric(float64(after.NumGC-before.NumGC), "gc")
		for _, r := range runs {
			if err := r.Dispose(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}
