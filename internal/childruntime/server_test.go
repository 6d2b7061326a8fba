package childruntime

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/internal/wire"
)

func TestInitializeReportsIdentity(t *testing.T) {
	r := startRuntime(t)
	res := r.initialize(r.script(`{"text": "hi"}`))
	assert.Equal(t, wire.ServerInfo{Name: "deepseek-harness-sdk-runtime", Version: "test-version"}, res.ServerInfo)

	err := r.call(wire.MethodInitialize, wire.InitializeParams{Cwd: r.cwd, Provider: "scripted", Model: "x"}, nil)
	assert.Equal(t, "initialize: the runtime is already initialized", rpcError(t, err).Message)
}

func TestInitializeDefaultVersion(t *testing.T) {
	r := startRuntime(t, func(o *Options) { o.Version = "" })
	assert.Equal(t, DefaultVersion, r.initialize("script.json").ServerInfo.Version)
}

func TestInitializeRejectsBadMaxTokens(t *testing.T) {
	for _, raw := range []string{`0`, `-1`, `1.5`, `"x"`, `"5"`, `9007199254740992`, `1e400`, `null`, `true`} {
		t.Run(raw, func(t *testing.T) {
			r := startRuntime(t)
			err := r.call(wire.MethodInitialize, wire.InitializeParams{
				Cwd: r.cwd, Provider: "scripted", Model: "s.json", MaxTokens: json.RawMessage(raw),
			}, nil)
			we := rpcError(t, err)
			assert.Equal(t, "initialize maxTokens must be a positive safe integer", we.Message)
			assert.Equal(t, wire.CodeInternalError, we.Code)
		})
	}
}

func TestInitializeMaxTokensReachesTheSessionRoute(t *testing.T) {
	r := startRuntime(t)
	script := r.script(`{"text": "ok"}`)
	require.NoError(t, r.call(wire.MethodInitialize, wire.InitializeParams{
		Cwd: r.cwd, Provider: "scripted", Model: script, MaxTokens: json.RawMessage(`9007199254740991`),
	}, nil))
	r.prompt("s1", "hello")
	r.notes.waitIdle(t, "s1")

	h, _, err := loadSession(t, r.sessions, "s1")
	require.NoError(t, err)
	assert.Equal(t, &session.Route{Provider: "scripted", Model: script, MaxTokens: session.MaxSafeInteger}, h.Route)
}

func TestInitializeRejectsUnknownProvider(t *testing.T) {
	r := startRuntime(t)
	err := r.call(wire.MethodInitialize, wire.InitializeParams{Cwd: r.cwd, Provider: "nope", Model: "m"}, nil)
	assert.Equal(t, `no adapter registered for provider "nope"`, rpcError(t, err).Message)
}

func TestInitializeRejectsBadCwd(t *testing.T) {
	r := startRuntime(t)
	err := r.call(wire.MethodInitialize, wire.InitializeParams{Cwd: "rel/dir", Provider: "scripted", Model: "m"}, nil)
	assert.Equal(t, `initialize cwd must be an absolute path: "rel/dir"`, rpcError(t, err).Message)

	missing := filepath.Join(r.cwd, "missing")
	err = r.call(wire.MethodInitialize, wire.InitializeParams{Cwd: missing, Provider: "scripted", Model: "m"}, nil)
	assert.Equal(t, `initialize cwd is not an accessible directory: "`+missing+`"`, rpcError(t, err).Message)

	// A failed initialize leaves the runtime uninitialized.
	r.initialize("script.json")
}

func TestPromptBeforeInitialize(t *testing.T) {
	r := startRuntime(t)
	err := r.call(wire.MethodSessionPrompt, wire.PromptParams{SessionID: "s1", ContentBlocks: []session.Block{session.Text("x")}}, nil)
	assert.Equal(t, "session/prompt before initialize: send initialize first", rpcError(t, err).Message)
}

func TestUnknownMethod(t *testing.T) {
	r := startRuntime(t)
	we := rpcError(t, r.call("session/cancel", nil, nil))
	assert.Equal(t, wire.CodeMethodNotFound, we.Code)
	assert.Equal(t, "method not found: session/cancel", we.Message)
}

func TestPromptNewSession(t *testing.T) {
	r := startRuntime(t)
	script := r.script(`{"text": "hello there", "chunks": 3}`)
	r.initialize(script)
	msgID := r.prompt("child-1", "say hello")
	notes := r.notes.waitIdle(t, "child-1")

	// running first, idle last and only once, right after turn/end.
	require.GreaterOrEqual(t, len(notes), 3)
	assert.Equal(t, wire.StatusRunning, notes[0].Status)
	assert.Equal(t, wire.StatusIdle, notes[len(notes)-1].Status)
	require.NotNil(t, notes[len(notes)-2].Event)
	assert.Equal(t, session.TypeTurnEnd, notes[len(notes)-2].Event.Type)

	evs := events(notes)
	for i, ev := range evs {
		assert.Equal(t, int64(i), ev.Seq, "events in seq order from 0")
	}
	require.Equal(t, session.TypeInboxSpliced, evs[0].Type)
	var receipt session.InboxSplicedData
	require.NoError(t, evs[0].Decode(&receipt))
	require.Len(t, receipt.Inserted, 1)
	assert.Equal(t, msgID, receipt.Inserted[0].ID)
	assert.Equal(t, []session.Block{session.Text("say hello")}, receipt.Inserted[0].Content)

	var deltas string
	for _, ev := range evs {
		if ev.Type == session.TypeAssistantChunk {
			var c session.AssistantChunkData
			require.NoError(t, ev.Decode(&c))
			deltas += c.Chunk.Text
		}
	}
	assert.Equal(t, "hello there", deltas)
	assert.Equal(t, session.EndReason{Kind: session.EndCompleted}, lastTurnEnd(t, evs).Reason)

	// The transcript stays in the runtime's own session root, under its cwd, and the
	// notifications are exactly the log.
	h, logged, err := loadSession(t, r.sessions, "child-1")
	require.NoError(t, err)
	assert.Equal(t, session.Header{
		ID: "child-1", Cwd: r.cwd, AgentPreset: agent.DefaultPresetName,
		Route: &session.Route{Provider: "scripted", Model: script},
	}, h)
	require.Len(t, logged, len(evs))
	for i := range logged {
		assert.Equal(t, logged[i].Type, evs[i].Type)
		assert.JSONEq(t, string(logged[i].Data), string(evs[i].Data))
	}
}

func TestPromptsQueuedOnABusySessionReportIdleOnce(t *testing.T) {
	r := startRuntime(t)
	r.initialize(r.script(`{"text": "first", "delayMs": 200}`, `{"text": "second"}`, `{"text": "third"}`))
	first := r.prompt("s", "one")
	second := r.prompt("s", "two")
	notes := r.notes.waitIdle(t, "s")

	var statuses []string
	for _, n := range notes {
		if n.Status != "" {
			statuses = append(statuses, n.Status)
		}
	}
	assert.Equal(t, []string{wire.StatusRunning, wire.StatusIdle}, statuses)
	evs := events(notes)
	assert.Equal(t, session.TypeTurnEnd, evs[len(evs)-1].Type, "idle comes after the last turn/end")
	var received []string
	for _, ev := range evs {
		if ev.Type == session.TypeInboxSpliced {
			var d session.InboxSplicedData
			require.NoError(t, ev.Decode(&d))
			for _, m := range d.Inserted {
				received = append(received, m.ID)
			}
		}
	}
	assert.Equal(t, []string{first, second}, received)

	// The session is reused, not recreated: a later prompt continues its log.
	r.prompt("s", "three")
	require.Eventually(t, func() bool {
		var idles int
		for _, n := range r.notes.forSession(t, "s") {
			if n.Status == wire.StatusIdle {
				idles++
			}
		}
		return idles == 2
	}, waitTimeout, 2*time.Millisecond)
}

func TestToolRoundTripThroughReadFile(t *testing.T) {
	r := startRuntime(t)
	require.NoError(t, os.WriteFile(filepath.Join(r.cwd, "notes.txt"), []byte("the secret is 42\n"), 0o644))
	r.initialize(r.script(
		`{"toolCalls": [{"name": "read_file", "input": {"path": "notes.txt"}}]}`,
		`{"text": "It says 42."}`,
	))
	r.prompt("s1", "what does notes.txt say?")
	evs := events(r.notes.waitIdle(t, "s1"))

	var result *session.ToolResultData
	for _, ev := range evs {
		if ev.Type == session.TypeToolResult {
			result = &session.ToolResultData{}
			require.NoError(t, ev.Decode(result))
		}
	}
	require.NotNil(t, result, "tool/result event")
	assert.Equal(t, "read_file", result.Name)
	assert.False(t, result.IsError)
	assert.Contains(t, session.JoinText(result.Content), "the secret is 42")
	assert.Equal(t, session.EndReason{Kind: session.EndCompleted}, lastTurnEnd(t, evs).Reason)
}

func TestScriptErrorEndsTurnWithError(t *testing.T) {
	r := startRuntime(t)
	r.initialize(r.script(`{"error": "upstream exploded"}`))
	r.prompt("s1", "go")
	evs := events(r.notes.waitIdle(t, "s1"))
	assert.Equal(t, session.EndReason{Kind: session.EndError, Message: "upstream exploded"}, lastTurnEnd(t, evs).Reason)
}

func TestShutdownRepliesThenDisposesAndExits0(t *testing.T) {
	r := startRuntime(t)
	r.initialize(r.script(`{"text": "never finished", "delayMs": 60000}`))
	r.prompt("s1", "take your time")
	r.notes.waitEvent(t, "s1", session.TypeStepStart)

	var res json.RawMessage
	require.NoError(t, r.call(wire.MethodShutdown, struct{}{}, &res))
	assert.JSONEq(t, `{}`, string(res))
	assert.Equal(t, 0, r.wait())

	// The running turn was disposed, and its end reached the client before the exit.
	notes := r.notes.forSession(t, "s1")
	require.GreaterOrEqual(t, len(notes), 2)
	assert.Equal(t, wire.StatusIdle, notes[len(notes)-1].Status)
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseDisposed},
		lastTurnEnd(t, events(notes)).Reason)

	// The disposed turn is durable in the session log.
	_, logged, err := loadSession(t, r.sessions, "s1")
	require.NoError(t, err)
	assert.Equal(t, session.TypeTurnEnd, logged[len(logged)-1].Type)
}

func TestPromptWhileShuttingDown(t *testing.T) {
	s, err := newServer(Options{Version: "v"}, newLogger(nil))
	require.NoError(t, err)
	cwd := t.TempDir()
	_, err = s.call(wire.MethodInitialize, json.RawMessage(`{"cwd":`+quote(cwd)+`,"provider":"scripted","model":"s.json"}`))
	require.NoError(t, err)
	_, err = s.call(wire.MethodShutdown, json.RawMessage(`{}`))
	require.NoError(t, err)

	_, err = s.call(wire.MethodSessionPrompt, json.RawMessage(`{"sessionId":"s1","contentBlocks":[{"type":"text","text":"x"}]}`))
	require.EqualError(t, err, "SDK server is shutting down")
	go s.out.run()
	s.dispose()
}

func TestStdinEOFExits0(t *testing.T) {
	r := startRuntime(t)
	r.initialize(r.script(`{"text": "hi"}`))
	r.prompt("s1", "hello")
	r.notes.waitIdle(t, "s1")
	require.NoError(t, r.stdin.Close())
	assert.Equal(t, 0, r.wait())
}

func TestContextDoneExits0(t *testing.T) {
	r := startRuntime(t)
	r.initialize("script.json")
	r.cancel()
	assert.Equal(t, 0, r.wait())
}

func TestHandlerPanicAnswersInternalError(t *testing.T) {
	stderr := &syncBuffer{}
	s, err := newServer(Options{}, newLogger(stderr))
	require.NoError(t, err)
	s.handlers["boom"] = func(context.Context, json.RawMessage) (any, error) { panic("kaboom") }
	_, err = s.call("boom", nil)
	require.EqualError(t, err, "server: internal error in boom: kaboom")
	assert.Contains(t, stderr.String(), "handler panicked")
	assert.Contains(t, stderr.String(), "kaboom")
	assert.Equal(t, wire.CodeInternalError, toWireError(err).Code)
}

func TestBadConfigIsAUsageError(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "presets.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"default": {"tools": [""]}}`), 0o644))
	stderr := &syncBuffer{}
	code := Run(context.Background(), Options{In: emptyReader{}, Out: &syncBuffer{}, Err: stderr, ConfigPath: bad})
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, stderr.String(), "tool 0 has an empty name")
}

func TestConfigPresetReplacesTheDefault(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "presets.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"default": {"tools": ["list_dir"]}}`), 0o644))
	r := startRuntime(t, func(o *Options) { o.ConfigPath = cfg })
	r.initialize(r.script(`{"toolCalls": [{"name": "read_file", "input": {"path": "script.json"}}]}`, `{"text": "done"}`))
	r.prompt("s1", "read")
	for _, ev := range events(r.notes.waitIdle(t, "s1")) {
		if ev.Type == session.TypeToolResult {
			var d session.ToolResultData
			require.NoError(t, ev.Decode(&d))
			assert.True(t, d.IsError, "read_file is outside the configured preset")
		}
	}
}

// loadSession reads a session from the runtime's own session root.
func loadSession(t *testing.T, root, id string) (session.Header, []session.Event, error) {
	t.Helper()
	store, err := filestore.New(root)
	require.NoError(t, err)
	defer store.Close()
	return store.Load(context.Background(), id)
}

func quote(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

// emptyReader is an input that is at its end.
type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }

func TestInitializeValidatesSandboxAndMaxDepth(t *testing.T) {
	for _, tc := range []struct {
		params wire.InitializeParams
		msg    string
	}{
		{wire.InitializeParams{Sandbox: "Read-Only"}, `initialize sandbox: unknown sandbox mode "Read-Only"; known modes: read-only, workspace-write`},
		{wire.InitializeParams{MaxDepth: json.RawMessage(`-1`)}, "initialize maxDepth must be a non-negative safe integer"},
		{wire.InitializeParams{MaxDepth: json.RawMessage(`1.5`)}, "initialize maxDepth must be a non-negative safe integer"},
	} {
		r := startRuntime(t)
		tc.params.Cwd, tc.params.Provider = r.cwd, "scripted"
		err := r.call(wire.MethodInitialize, tc.params, nil)
		assert.Equal(t, tc.msg, rpcError(t, err).Message)
	}
}

// TestDelegatedPolicyReachesSessions: initialize's sandbox mode and remaining depth are in
// every session the runtime creates — the mode as delegated policy events, the depth as the
// header's subtree cap — so its tools and nested delegations obey them.
func TestDelegatedPolicyReachesSessions(t *testing.T) {
	r := startRuntime(t)
	r.script(`{"toolCalls": [{"name": "write_file", "input": {"path": "x.txt", "content": "x"}}]}`, `{"text": "done"}`)
	var res wire.InitializeResult
	require.NoError(t, r.call(wire.MethodInitialize, wire.InitializeParams{
		Cwd: r.cwd, Provider: "scripted", Model: "script.json", Sandbox: "read-only", MaxDepth: json.RawMessage(`0`),
	}, &res))
	r.prompt("s1", "write")
	r.notes.waitIdle(t, "s1")
	h, logged, err := loadSession(t, r.sessions, "s1")
	require.NoError(t, err)
	require.NotNil(t, h.MaxDepth)
	assert.Equal(t, int64(0), *h.MaxDepth)
	require.GreaterOrEqual(t, len(logged), 2)
	assert.Equal(t, session.TypeSandboxMode, logged[0].Type)
	assert.Equal(t, session.TypeApprovalPolicy, logged[1].Type)
	assert.NoFileExists(t, filepath.Join(r.cwd, "x.txt"))
}

// TestToolsRefuseTheClientsStateDirs: the directories initialize names as protected (the
// worker's file store, its payloads) are refused to the runtime's file tools whatever the
// cwd, like the runtime's own sessions (docs/sdk-children.md).
func TestToolsRefuseTheClientsStateDirs(t *testing.T) {
	r := startRuntime(t)
	store := filepath.Join(r.cwd, "worker-sessions")
	require.NoError(t, os.MkdirAll(filepath.Join(store, "other-run"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(store, "other-run", "events.jsonl"), []byte("another run's transcript\n"), 0o600))
	script := r.script(
		`{"toolCalls": [{"name": "read_file", "input": {"path": "worker-sessions/other-run/events.jsonl"}}]}`,
		`{"text": "done"}`,
	)
	var res wire.InitializeResult
	require.NoError(t, r.call(wire.MethodInitialize, wire.InitializeParams{
		Cwd: r.cwd, Provider: "scripted", Model: script, Protected: []string{store},
	}, &res))
	r.prompt("s1", "read it")
	var result *session.ToolResultData
	for _, ev := range events(r.notes.waitIdle(t, "s1")) {
		if ev.Type == session.TypeToolResult {
			result = &session.ToolResultData{}
			require.NoError(t, ev.Decode(result))
		}
	}
	require.NotNil(t, result)
	assert.True(t, result.IsError)
	assert.Contains(t, session.JoinText(result.Content), "inside a session store")
}
