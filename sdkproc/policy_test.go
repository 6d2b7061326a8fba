package sdkproc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/subagent"
)

// toolResultsOf returns the tool/result events of a session in the runtime's session root.
func toolResultsOf(t *testing.T, root, id string) []session.ToolResultData {
	t.Helper()
	store, err := filestore.New(root)
	require.NoError(t, err)
	defer store.Close()
	_, events, err := store.Load(context.Background(), id)
	require.NoError(t, err)
	var out []session.ToolResultData
	for _, ev := range events {
		if ev.Type == session.TypeToolResult {
			var d session.ToolResultData
			require.NoError(t, ev.Decode(&d))
			out = append(out, d)
		}
	}
	return out
}

// TestReadOnlyParentsSDKChildCannotWrite: the parent's sandbox mode travels in initialize and
// the real runtime refuses the write.
func TestReadOnlyParentsSDKChildCannotWrite(t *testing.T) {
	cfg, req := agentConfig(t,
		`{"toolCalls": [{"name": "write_file", "input": {"path": "escaped.txt", "content": "written"}}]}`,
		`{"text": "tried"}`)
	root := cfg.Args[2]
	h := newHarness(t, cfg, Options{})
	r, err := h.p.StartRun(context.Background(), req, RunOptions{Sandbox: "read-only"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Dispose(context.Background()) })
	res := mustResult(t, r)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	_, err = os.Stat(filepath.Join(req.Parent.Cwd, "escaped.txt"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "no file was written")
	results := toolResultsOf(t, root, r.ID())
	require.Len(t, results, 1)
	assert.True(t, results[0].IsError)
	assert.Contains(t, session.JoinText(results[0].Content), "write_file needs approval while the sandbox is read-only")
}

func TestSDKStartRejectsUnknownSandboxMode(t *testing.T) {
	h := newHarness(t, badConfig("echo"), Options{})
	_, err := h.p.StartRun(context.Background(), request(t, "hi"), RunOptions{Sandbox: "Read-Only"})
	require.EqualError(t, err, `subagent-dsh-sdk: unknown sandbox mode "Read-Only"; known modes: read-only, workspace-write`)
	assert.Empty(t, h.logs.FilterMessage("child started").All(), "nothing was spawned")
}

func TestSDKHandshakeCarriesSandboxAndDepth(t *testing.T) {
	h := newHarness(t, badConfig("echo"), Options{})
	zero := int64(0)
	r, err := h.p.StartRun(context.Background(), request(t, "hi"), RunOptions{Sandbox: "read-only", MaxDepth: &zero})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Dispose(context.Background()) })
	var rep echoReport
	require.NoError(t, json.Unmarshal([]byte(text(mustResult(t, r))), &rep))
	require.Len(t, rep.Initialize, 1)
	assert.Equal(t, "read-only", rep.Initialize[0]["sandbox"])
	assert.Equal(t, float64(0), rep.Initialize[0]["maxDepth"])
}

// TestSDKChildCannotReadAnotherRunsTranscript: the runtime keeps its sessions apart from
// the cwd, and even when the cwd contains the session root the file tools refuse it.
func TestSDKChildCannotReadAnotherRunsTranscript(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "state", "sessions")
	cfg, req := agentConfig(t)
	cfg.Args = []string{"child-runtime", "--session-root", root}
	req.Parent.Cwd = base
	require.NoError(t, os.WriteFile(filepath.Join(base, "script.json"),
		[]byte(`{"responses": [{"text": "the first run's secret answer"}]}`), 0o644))
	h := newHarness(t, cfg, Options{})
	a := h.start(t, req)
	require.Equal(t, subagent.StopCompleted, mustResult(t, a).StopReason)
	transcript := filepath.Join("state", "sessions", a.ID(), "events.jsonl")
	require.FileExists(t, filepath.Join(base, transcript))
	assert.NoDirExists(t, filepath.Join(base, ".subflow"), "nothing under the cwd's .subflow")

	script := `{"responses": [
		{"toolCalls": [
			{"name": "read_file", "input": {"path": ` + quoteJSON(transcript) + `}},
			{"name": "list_dir", "input": {"path": "state/sessions"}},
			{"name": "grep", "input": {"pattern": "secret"}},
			{"name": "write_file", "input": {"path": ` + quoteJSON(transcript) + `, "content": "overwritten"}}
		]},
		{"text": "done"}
	]}`
	require.NoError(t, os.WriteFile(filepath.Join(base, "script.json"), []byte(script), 0o644))
	b := h.start(t, req)
	require.Equal(t, subagent.StopCompleted, mustResult(t, b).StopReason)
	results := toolResultsOf(t, root, b.ID())
	require.Len(t, results, 4)
	for i, r := range results[:2] {
		assert.True(t, r.IsError, "call %d", i)
		assert.Contains(t, session.JoinText(r.Content), "is inside a session store", "call %d", i)
	}
	assert.False(t, strings.Contains(session.JoinText(results[2].Content), "secret answer"), "grep skips the store")
	assert.True(t, results[3].IsError)
	data, err := os.ReadFile(filepath.Join(base, transcript))
	require.NoError(t, err)
	assert.Contains(t, string(data), "the first run's secret answer", "the transcript is untouched")
}

func quoteJSON(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}
