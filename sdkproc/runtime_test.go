package sdkproc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// agentConfig runs the project's child runtime on the scripted model with the given
// responses, written to a script file in the returned request's parent cwd.
func agentConfig(t testing.TB, responses ...string) (Config, subagent.Request) {
	t.Helper()
	req := request(t, "do the task")
	script := `{"responses": [` + join(responses) + `]}`
	require.NoError(t, os.WriteFile(filepath.Join(req.Parent.Cwd, "script.json"), []byte(script), 0o644))
	return Config{
		Command:           agentBin,
		Args:              []string{"child-runtime", "--session-root", t.TempDir()},
		Provider:          "scripted",
		Model:             "script.json", // resolves against the session cwd
		ShutdownTimeoutMs: 2000,
		DisposeEOFGraceMs: 2000,
		DisposeGraceMs:    2000,
	}, req
}

func join(parts []string) string {
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += ","
		}
		out += p
	}
	return out
}

func TestRuntimeStopReasons(t *testing.T) {
	for _, tc := range []struct {
		name     string
		response string
		stop     subagent.StopReason
		text     string
	}{
		{"completed", `{"text": "hello from the child", "chunks": 3}`, subagent.StopCompleted, "hello from the child"},
		{"max-tokens", `{"text": "cut sh", "finish": "length"}`, subagent.StopMaxTokens, "cut sh"},
		{"error", `{"error": "model exploded"}`, subagent.StopError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, req := agentConfig(t, tc.response)
			h := newHarness(t, cfg, Options{})
			r := h.start(t, req)
			res := mustResult(t, r)
			assert.Equal(t, tc.stop, res.StopReason)
			assert.Equal(t, tc.text, text(res))
			assert.Empty(t, h.warnings(), "a turn that ends in error is no transport failure")
			require.NoError(t, r.Dispose(context.Background()))
			requireGone(t, r.PID())
			assert.Equal(t, 0, r.ExitState().ExitCode(), "the runtime exits 0 on shutdown")
		})
	}
}

func TestRuntimeSessionHeader(t *testing.T) {
	cfg, req := agentConfig(t, `{"text": "done"}`)
	cfg.MaxTokens = 321
	h := newHarness(t, cfg, Options{})
	r := h.start(t, req)
	require.Equal(t, subagent.StopCompleted, mustResult(t, r).StopReason)
	p := r.Progress()
	assert.Equal(t, PhaseSettled, p.Phase)
	assert.Equal(t, 1, p.Steps)
	assert.Equal(t, "done", p.Tail)
	require.NoError(t, r.Dispose(context.Background()))

	raw, err := os.ReadFile(filepath.Join(cfg.Args[2], r.ID(), "header.json"))
	require.NoError(t, err, "the child's transcript stays in its own session root")
	assert.NoDirExists(t, filepath.Join(req.Parent.Cwd, ".subflow"), "never under the cwd")
	var hdr session.Header
	require.NoError(t, json.Unmarshal(raw, &hdr))
	assert.Equal(t, realpath(t, req.Parent.Cwd), hdr.Cwd)
	require.NotNil(t, hdr.Route)
	assert.Equal(t, session.Route{Provider: "scripted", Model: "script.json", MaxTokens: 321}, *hdr.Route)
}

func TestRuntimeDisposeMidTurnIsAborted(t *testing.T) {
	cfg, req := agentConfig(t, `{"text": "first second third fourth", "chunks": 4, "delayMs": 120000}`)
	h := newHarness(t, cfg, Options{})
	r := h.start(t, req)
	resc := make(chan subagent.Result, 1)
	go func() { resc <- mustResult(t, r) }()
	waitPhase(t, r, PhaseRunning)
	require.NoError(t, r.Dispose(context.Background()))
	res := <-resc
	assert.Equal(t, subagent.StopAborted, res.StopReason)
	requireGone(t, r.PID())
	assert.Empty(t, h.warnings())
}

func TestRuntimeUnknownProvider(t *testing.T) {
	cfg, req := agentConfig(t)
	cfg.Provider = "nope"
	h := newHarness(t, cfg, Options{})
	_, err := h.p.Start(context.Background(), req)
	require.EqualError(t, err, `no adapter registered for provider "nope"`)
	var ve *subagent.ValidationError
	require.ErrorAs(t, err, &ve, "the runtime's refusal is a rejection, not a failure")
	assert.Equal(t, subagent.RuleUnknownModel, ve.Rule)
	requireGone(t, h.startedPID(t))
}
