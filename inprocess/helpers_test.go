package inprocess

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

// fixture is a working directory, a real FileStore, the real scripted model behind a
// recording decorator, the built-in tools plus a counting tool, and a Host over them.
type fixture struct {
	cwd      string
	store    *filestore.Store
	recorder *recorder
	models   *model.Registry
	tools    *tools.Registry
	presets  map[string]agent.Preset
	host     *Host
	counted  atomic.Int64 // executions of the "count" tool
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	store, err := filestore.New(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	f := &fixture{cwd: t.TempDir(), store: store, tools: &tools.Registry{}}
	require.NoError(t, tools.RegisterBuiltins(f.tools))
	require.NoError(t, f.tools.Register(tools.Tool{
		Name:        "count",
		Description: "Count this call.",
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, tools.Env, tools.Call) (tools.Result, error) {
			return tools.TextResult(itoa(f.counted.Add(1))), nil
		},
	}))
	preset := agent.DefaultPreset()
	preset.Tools = append(preset.Tools, "count")
	f.presets = map[string]agent.Preset{agent.DefaultPresetName: preset}
	f.recorder = &recorder{next: model.NewScripted()}
	f.models = &model.Registry{}
	f.models.Register(model.ProviderScripted, f.recorder)
	f.host = f.hostWith(t, f.recorder)
	return f
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// freshHost returns another Host over the same store and tools with a new scripted model:
// what another worker process would have.
func (f *fixture) freshHost(t testing.TB) *Host {
	return f.hostWith(t, model.NewScripted())
}

func (f *fixture) hostWith(t testing.TB, m model.Model) *Host {
	t.Helper()
	models := &model.Registry{}
	models.Register(model.ProviderScripted, m)
	h, err := NewHost(Options{Store: f.store, Models: models, Tools: f.tools, Presets: f.presets})
	require.NoError(t, err)
	return h
}

// script writes a script file into the working directory and returns its name.
func (f *fixture) script(t testing.TB, name string, responses ...string) string {
	t.Helper()
	body := `{"responses": [`
	for i, r := range responses {
		if i > 0 {
			body += ","
		}
		body += r
	}
	body += "]}"
	require.NoError(t, os.WriteFile(filepath.Join(f.cwd, name), []byte(body), 0o644))
	return name
}

// parent creates a root parent session routed to the scripted model with script, holding
// events (numbered here) after its header.
func (f *fixture) parent(t testing.TB, hd session.Header, events ...session.Event) string {
	t.Helper()
	if hd.ID == "" {
		hd.ID = uuid.NewString()
	}
	hd.Cwd = f.cwd
	require.NoError(t, f.store.Create(context.Background(), hd))
	if len(events) > 0 {
		require.NoError(t, f.store.Append(context.Background(), hd.ID, session.Renumber(events, 0)...))
	}
	return hd.ID
}

func route(script string) *session.Route {
	return &session.Route{Provider: model.ProviderScripted, Model: script}
}

func event(t testing.TB, typ string, data any) session.Event {
	t.Helper()
	ev, err := session.NewEvent(typ, data)
	require.NoError(t, err)
	return ev
}

func request(parent, prompt string) subagent.Request {
	return subagent.Request{
		Prompt: []session.Block{session.Text(prompt)},
		Parent: subagent.ParentRef{SessionID: parent},
	}
}

func (f *fixture) events(t testing.TB, id string) []session.Event {
	t.Helper()
	_, events, err := f.store.Load(context.Background(), id)
	require.NoError(t, err)
	return events
}

func (f *fixture) header(t testing.TB, id string) session.Header {
	t.Helper()
	hd, _, err := f.store.Load(context.Background(), id)
	require.NoError(t, err)
	return hd
}

// sessions lists the session ids in the store.
func (f *fixture) sessions(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(f.store.Root())
	require.NoError(t, err)
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

func result(t testing.TB, r *Run) subagent.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.Result(ctx)
	require.NoError(t, err)
	return res
}

func types(events []session.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

func decode[T any](t testing.TB, e session.Event) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(e.Data, &v))
	return v
}

func lastTurnEnd(t testing.TB, events []session.Event) session.EndReason {
	t.Helper()
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == session.TypeTurnEnd {
			return decode[session.TurnEndData](t, events[i]).Reason
		}
	}
	t.Fatal("no turn/end in the log")
	return session.EndReason{}
}

func toolResults(t testing.TB, events []session.Event) []session.ToolResultData {
	t.Helper()
	var out []session.ToolResultData
	for _, e := range events {
		if e.Type == session.TypeToolResult {
			out = append(out, decode[session.ToolResultData](t, e))
		}
	}
	return out
}

// recorder is a model.Model decorator keeping every request it forwards.
type recorder struct {
	next model.Model
	mu   sync.Mutex
	reqs []model.Request
}

func (r *recorder) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.next.Stream(ctx, req, onText)
}

// requests returns the requests of one session.
func (r *recorder) requests(sessionID string) []model.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []model.Request
	for _, req := range r.reqs {
		if req.SessionID == sessionID {
			out = append(out, req)
		}
	}
	return out
}

func toolNames(req model.Request) []string {
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	return names
}
