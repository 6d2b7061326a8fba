package activities_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/sdkproc"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// TestMain lets the test binary serve as the sdk child command (os.Executable() child-runtime).
func TestMain(m *testing.M) {
	app.MaybeRunChildRuntime()
	os.Exit(m.Run())
}

const parentID = "parent"

// fixture is a working directory with a script, a real FileStore holding a root parent
// session routed to the scripted model, and the real activities over them.
type fixture struct {
	t     *testing.T
	cwd   string
	root  string
	store *filestore.Store
	gate  *gate
}

func newFixture(t *testing.T, responses ...string) *fixture {
	t.Helper()
	f := &fixture{t: t, cwd: t.TempDir(), root: t.TempDir(), gate: &gate{entered: make(chan struct{})}}
	var err error
	f.store, err = filestore.New(f.root)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.store.Close() })
	body, err := json.Marshal(map[string]any{"responses": rawList(responses)})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.cwd, "script.json"), body, 0o644))
	require.NoError(t, f.store.Create(context.Background(), session.Header{
		ID: parentID, Cwd: f.cwd, Route: &session.Route{Provider: model.ProviderScripted, Model: "script.json"},
	}))
	return f
}

func rawList(items []string) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, s := range items {
		out[i] = json.RawMessage(s)
	}
	return out
}

// activities returns new activities over the fixture's store, as one worker has them: a
// fresh model registry and tool registry each time.
func (f *fixture) activities(mod ...func(*activities.Config)) *activities.Activities {
	f.t.Helper()
	reg := &tools.Registry{}
	require.NoError(f.t, tools.RegisterBuiltins(reg))
	require.NoError(f.t, reg.Register(counterTool()))
	require.NoError(f.t, reg.Register(f.gate.tool()))
	exe, err := os.Executable()
	require.NoError(f.t, err)
	cfg := activities.Config{
		Store:             f.store,
		Models:            model.NewDefaultRegistry(),
		Tools:             reg,
		SDK:               sdkConfig(exe, f.t.TempDir()),
		HeartbeatInterval: 20 * time.Millisecond,
		// The zero preset shows every registry tool, the test tools included.
		Presets: map[string]agent.Preset{agent.DefaultPresetName: {}},
	}
	for _, m := range mod {
		m(&cfg)
	}
	a, err := activities.New(cfg)
	require.NoError(f.t, err)
	return a
}

// env is a test activity environment with every activity registered, recording heartbeats.
type env struct {
	*testsuite.TestActivityEnvironment
	mu         sync.Mutex
	heartbeats []workflows.Progress
}

func newEnv(t *testing.T, a *activities.Activities, opts worker.Options) *env {
	var s testsuite.WorkflowTestSuite
	e := &env{TestActivityEnvironment: s.NewTestActivityEnvironment()}
	// The SDK batches heartbeats before they reach the test environment's listener; an
	// interceptor sees every RecordHeartbeat call.
	opts.Interceptors = append(opts.Interceptors, &heartbeatRecorder{env: e})
	e.SetWorkerOptions(opts)
	activities.Register(e, a)
	return e
}

// heartbeatRecorder records the Progress of every heartbeat.
type heartbeatRecorder struct {
	interceptor.WorkerInterceptorBase
	env *env
}

func (h *heartbeatRecorder) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	in := &heartbeatInbound{env: h.env}
	in.Next = next
	return in
}

type heartbeatInbound struct {
	interceptor.ActivityInboundInterceptorBase
	env *env
}

func (i *heartbeatInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	out := &heartbeatOutbound{env: i.env}
	out.Next = outbound
	return i.Next.Init(out)
}

type heartbeatOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	env *env
}

func (o *heartbeatOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if len(details) == 1 {
		if p, ok := details[0].(workflows.Progress); ok {
			o.env.mu.Lock()
			o.env.heartbeats = append(o.env.heartbeats, p)
			o.env.mu.Unlock()
		}
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

func (e *env) progress() []workflows.Progress {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]workflows.Progress(nil), e.heartbeats...)
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// receive waits for c to be closed or to deliver.
func receive[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func (f *fixture) events(id string) []session.Event {
	f.t.Helper()
	_, events, err := f.store.Load(context.Background(), id)
	require.NoError(f.t, err)
	return events
}

func (f *fixture) hasEvent(id, typ string) bool {
	_, events, err := f.store.Load(context.Background(), id)
	if err != nil {
		return false
	}
	for _, e := range events {
		if e.Type == typ {
			return true
		}
	}
	return false
}

func turnEnds(t *testing.T, events []session.Event) []session.TurnEndData {
	t.Helper()
	var out []session.TurnEndData
	for _, e := range events {
		if e.Type == session.TypeTurnEnd {
			var d session.TurnEndData
			require.NoError(t, e.Decode(&d))
			out = append(out, d)
		}
	}
	return out
}

func request(prompt string) subagent.Request {
	return subagent.Request{
		Prompt: []session.Block{session.Text(prompt)},
		Parent: subagent.ParentRef{SessionID: parentID},
	}
}

// counterTool increments counter.txt in the session cwd: a side effect that must happen once.
func counterTool() tools.Tool {
	return tools.Tool{
		Name:        "count",
		Description: "Increment the counter.",
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Handler: func(_ context.Context, env tools.Env, _ tools.Call) (tools.Result, error) {
			path := filepath.Join(env.Cwd, "counter.txt")
			raw, _ := os.ReadFile(path)
			raw = append(raw, '1')
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				return tools.Result{}, err
			}
			return tools.TextResult(string(raw)), nil
		},
	}
}

func counter(t *testing.T, cwd string) int {
	raw, err := os.ReadFile(filepath.Join(cwd, "counter.txt"))
	require.NoError(t, err)
	return strings.Count(string(raw), "1")
}

// gate is a tool whose first call blocks until its context ends (a tool in flight when the
// worker stops); later calls pass.
type gate struct {
	mu      sync.Mutex
	calls   int
	entered chan struct{}
}

func (g *gate) tool() tools.Tool {
	return tools.Tool{
		Name:        "gate",
		Description: "Wait at the gate.",
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, _ tools.Env, _ tools.Call) (tools.Result, error) {
			g.mu.Lock()
			g.calls++
			first := g.calls == 1
			g.mu.Unlock()
			if !first {
				return tools.TextResult("passed"), nil
			}
			close(g.entered)
			<-ctx.Done()
			return tools.Result{}, ctx.Err()
		},
	}
}

// sdkConfig runs this test binary as the child runtime, on the fixture's script.
func sdkConfig(exe, sessionRoot string) sdkproc.Config {
	return sdkproc.Config{
		Command:  exe,
		Args:     []string{app.ChildRuntimeArg, "--session-root", sessionRoot},
		Provider: model.ProviderScripted,
		Model:    "script.json",
	}
}
