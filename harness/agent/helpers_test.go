package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
)

// fixture is a working directory, a real FileStore, the real scripted model (behind a
// recorder) and a tool registry with the built-ins.
type fixture struct {
	t        testing.TB
	cwd      string
	store    *filestore.Store
	models   *model.Registry
	recorder *recorder
	tools    *tools.Registry
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	store, err := filestore.New(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	f := &fixture{t: t, cwd: t.TempDir(), store: store, tools: &tools.Registry{}}
	require.NoError(t, tools.RegisterBuiltins(f.tools))
	f.freshModel()
	return f
}

// freshModel replaces the model registry, as a new process would have it.
func (f *fixture) freshModel() {
	f.recorder = &recorder{next: model.NewScripted()}
	f.models = &model.Registry{}
	f.models.Register(model.ProviderScripted, f.recorder)
}

// script writes a script file into the working directory and returns its name.
func (f *fixture) script(responses ...string) string {
	f.t.Helper()
	body := `{"responses": [`
	for i, r := range responses {
		if i > 0 {
			body += ","
		}
		body += r
	}
	body += "]}"
	require.NoError(f.t, os.WriteFile(filepath.Join(f.cwd, "script.json"), []byte(body), 0o644))
	return "script.json"
}

// create creates a session routed to the scripted model with the given script.
func (f *fixture) create(id, script string) session.Header {
	f.t.Helper()
	h := session.Header{ID: id, Cwd: f.cwd}
	if script != "" {
		h.Route = &session.Route{Provider: model.ProviderScripted, Model: script}
	}
	require.NoError(f.t, f.store.Create(context.Background(), h))
	return h
}

func (f *fixture) open(id string, mod ...func(*Options)) *Agent {
	f.t.Helper()
	opts := Options{Store: f.store, SessionID: id, Models: f.models, Tools: f.tools, Preset: DefaultPreset()}
	for _, m := range mod {
		m(&opts)
	}
	a, err := Open(context.Background(), opts)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { _ = a.Close(context.Background()) })
	return a
}

func (f *fixture) events(id string) []session.Event {
	f.t.Helper()
	_, events, err := f.store.Load(context.Background(), id)
	require.NoError(f.t, err)
	return events
}

// ask queues text and waits until the agent is idle.
func ask(t *testing.T, a *Agent, text string) string {
	t.Helper()
	id, err := a.Followup(context.Background(), []session.Block{session.Text(text)})
	require.NoError(t, err)
	waitIdle(t, a)
	return id
}

func waitIdle(t *testing.T, a *Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, a.WhenIdle(ctx))
}

func types(events []session.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

func decode[T any](t *testing.T, e session.Event) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(e.Data, &v))
	return v
}

func lastTurnEnd(t *testing.T, events []session.Event) session.TurnEndData {
	t.Helper()
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == session.TypeTurnEnd {
			return decode[session.TurnEndData](t, events[i])
		}
	}
	t.Fatal("no turn/end in the log")
	return session.TurnEndData{}
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

func (r *recorder) requests() []model.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]model.Request(nil), r.reqs...)
}

// collector is a subscriber keeping what it saw.
type collector struct {
	mu     sync.Mutex
	events []session.Event
	onEv   func(session.Event)
}

func (c *collector) add(e session.Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
	if c.onEv != nil {
		c.onEv(e)
	}
}

func (c *collector) seen() []session.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]session.Event(nil), c.events...)
}

// requireSameLog asserts that what a subscriber saw is exactly the stored log from seq from.
func requireSameLog(t *testing.T, seen, log []session.Event, from int) {
	t.Helper()
	require.Len(t, seen, len(log)-from)
	for i, e := range seen {
		want := log[from+i]
		require.Equal(t, want.Seq, e.Seq)
		require.Equal(t, want.Type, e.Type)
		require.JSONEq(t, string(want.Data), string(e.Data))
	}
}

// counterTool increments a number kept in a file of the working directory: a side effect
// that outlives the agent, like a real tool's.
func counterTool() tools.Tool {
	return tools.Tool{
		Name:        "count",
		Description: "Increment the counter.",
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Handler: func(_ context.Context, env tools.Env, _ tools.Call) (tools.Result, error) {
			path := filepath.Join(env.Cwd, "counter.txt")
			n := 0
			if raw, err := os.ReadFile(path); err == nil {
				if err := json.Unmarshal(raw, &n); err != nil {
					return tools.Result{}, err
				}
			}
			n++
			raw, _ := json.Marshal(n)
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				return tools.Result{}, err
			}
			return tools.TextResult(string(raw)), nil
		},
	}
}

func counter(t *testing.T, cwd string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cwd, "counter.txt"))
	require.NoError(t, err)
	var n int
	require.NoError(t, json.Unmarshal(raw, &n))
	return n
}
