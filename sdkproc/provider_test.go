package sdkproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// echoReport is what badchild's echo mode answers.
type echoReport struct {
	Initialize []map[string]any `json:"initialize"`
	Cwd        string           `json:"cwd"`
	Env        map[string]string
}

func echoRun(t *testing.T, cfg Config, req subagent.Request) echoReport {
	t.Helper()
	h := newHarness(t, cfg, Options{})
	r := h.start(t, req)
	res, err := r.Result(context.Background())
	require.NoError(t, err)
	require.Equal(t, subagent.StopCompleted, res.StopReason, "warnings: %v", h.warnings())
	var rep echoReport
	require.NoError(t, json.Unmarshal([]byte(text(res)), &rep))
	return rep
}

func TestHandshakeSentOnceWithRoute(t *testing.T) {
	cfg := badConfig("echo")
	cfg.Provider, cfg.Model, cfg.MaxTokens = "prov-a", "model-a", 100
	req := request(t, "hi")
	req.AgentOptions = session.Route{Model: "model-b"} // overrides field by field
	rep := echoRun(t, cfg, req)
	require.Len(t, rep.Initialize, 1, "initialize is sent exactly once")
	assert.Equal(t, map[string]any{
		"cwd": realpath(t, req.Parent.Cwd), "provider": "prov-a", "model": "model-b", "maxTokens": float64(100),
	}, rep.Initialize[0])
}

func TestHandshakeOmitsMaxTokensWhenUnset(t *testing.T) {
	rep := echoRun(t, badConfig("echo"), request(t, "hi"))
	require.Len(t, rep.Initialize, 1)
	assert.NotContains(t, rep.Initialize[0], "maxTokens")
	assert.Equal(t, "deepseek-official", rep.Initialize[0]["provider"])
	assert.Equal(t, "deepseek-v4-flash", rep.Initialize[0]["model"])
}

func TestChildEnvironmentIsAllowlisted(t *testing.T) {
	t.Setenv("MY_API_KEY", "ambient-secret")
	t.Setenv("DSH_X", "ambient-dsh")
	t.Setenv("SDKPROC_TEST_PLAIN", "not on the allowlist")
	t.Setenv("SDKPROC_TEST_ADDED", "added by the operator")
	t.Setenv("SDKPROC_TEST_ADDED_TOKEN", "added but denied")
	t.Setenv("LC_TIME", "C")
	t.Setenv("http_proxy", "proxy.local:8080")
	cfg := badConfig("echo")
	cfg.ChildEnv = []string{"SDKPROC_TEST_ADDED", "SDKPROC_TEST_ADDED_TOKEN"}
	cfg.Env = map[string]string{"DEEPSEEK_API_KEY": "explicit", "DSH_CONFIG": "explicit-dsh"}
	rep := echoRun(t, cfg, request(t, "hi"))

	assert.NotContains(t, rep.Env, "MY_API_KEY")
	assert.NotContains(t, rep.Env, "DSH_X")
	assert.NotContains(t, rep.Env, "SDKPROC_TEST_PLAIN")
	assert.NotContains(t, rep.Env, "SDKPROC_TEST_ADDED_TOKEN", "the denylist applies to operator names too")
	assert.Equal(t, "added by the operator", rep.Env["SDKPROC_TEST_ADDED"])
	assert.Equal(t, "C", rep.Env["LC_TIME"])
	assert.Equal(t, "proxy.local:8080", rep.Env["http_proxy"])
	assert.Equal(t, os.Getenv("PATH"), rep.Env["PATH"])
	assert.Equal(t, "explicit", rep.Env["DEEPSEEK_API_KEY"], "config env is set on top, unfiltered")
	assert.Equal(t, "explicit-dsh", rep.Env["DSH_CONFIG"])
}

// TestChildEnvironmentCanaries reads the environment of a real runtime child from
// /proc/<pid>/environ: none of the worker's credentials in disguise reaches it.
func TestChildEnvironmentCanaries(t *testing.T) {
	canaries := map[string]string{
		"SUBFLOW_SESSION_STORE":          "postgres://u:pw@h/db",
		"DATABASE_URL":                   "postgres://u:pw@h/db",
		"FOO_DSN":                        "u:pw@tcp(h)/db",
		"PGPASSWORD":                     "pw",
		"PGPASSFILE":                     "/home/u/.pgpass",
		"GOOGLE_APPLICATION_CREDENTIALS": "/secrets/gcp.json",
		"SSH_AUTH_SOCK":                  "/tmp/ssh-agent.sock",
		"AWS_SECRET_ACCESS_KEY":          "aws",
	}
	for k, v := range canaries {
		t.Setenv(k, v)
	}
	t.Setenv("HTTPS_PROXY", "http://u:p@proxy:3128")
	t.Setenv("no_proxy", "localhost,.internal")
	cfg := Config{Command: agentBin, Args: []string{"child-runtime", "--session-root", t.TempDir()}, Provider: "scripted",
		Env: map[string]string{"DEEPSEEK_API_KEY": "explicit-key"}}
	h := newHarness(t, cfg, Options{})
	r := h.start(t, request(t, "hi"))

	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", r.PID()))
	require.NoError(t, err)
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00") {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
	}
	for k := range canaries {
		assert.NotContains(t, env, k)
	}
	for name, value := range env {
		assert.NotContains(t, value, "pw", "variable %s", name)
	}
	assert.Equal(t, "http://proxy:3128", env["HTTPS_PROXY"], "proxy credentials are removed")
	assert.Equal(t, "localhost,.internal", env["no_proxy"])
	assert.Equal(t, "explicit-key", env["DEEPSEEK_API_KEY"], "an explicit provider key reaches the child")
	assert.Equal(t, os.Getenv("PATH"), env["PATH"])
}

func TestChildCwd(t *testing.T) {
	t.Run("config cwd wins, as realpath", func(t *testing.T) {
		target := t.TempDir()
		link := filepath.Join(t.TempDir(), "link")
		require.NoError(t, os.Symlink(target, link))
		cfg := badConfig("echo")
		cfg.Cwd = &link
		rep := echoRun(t, cfg, request(t, "hi"))
		assert.Equal(t, realpath(t, target), rep.Cwd)
		assert.Equal(t, realpath(t, target), rep.Initialize[0]["cwd"], "the process cwd is the session cwd")
	})
	t.Run("relative config cwd resolves against the process cwd", func(t *testing.T) {
		rel := "testdata"
		cfg := badConfig("echo")
		cfg.Cwd = &rel
		rep := echoRun(t, cfg, request(t, "hi"))
		wd, err := os.Getwd()
		require.NoError(t, err)
		assert.Equal(t, realpath(t, filepath.Join(wd, "testdata")), rep.Cwd)
	})
	t.Run("parent session cwd", func(t *testing.T) {
		req := request(t, "hi")
		rep := echoRun(t, badConfig("echo"), req)
		assert.Equal(t, realpath(t, req.Parent.Cwd), rep.Cwd)
	})
	t.Run("neither", func(t *testing.T) {
		h := newHarness(t, badConfig("echo"), Options{})
		req := request(t, "hi")
		req.Parent.Cwd = ""
		_, err := h.p.Start(context.Background(), req)
		require.EqualError(t, err, "subagent-dsh-sdk: no working directory for the child — configure `cwd` or delegate from a parent session that has one")
		var ve *subagent.ValidationError
		require.True(t, errors.As(err, &ve))
		assert.Empty(t, h.logs.FilterMessage("child started").All(), "nothing spawned")
	})
	t.Run("parent cwd not a directory", func(t *testing.T) {
		h := newHarness(t, badConfig("echo"), Options{})
		req := request(t, "hi")
		req.Parent.Cwd = filepath.Join(req.Parent.Cwd, "missing")
		_, err := h.p.Start(context.Background(), req)
		require.EqualError(t, err, "subagent-dsh-sdk: parent session cwd is not an accessible directory: "+req.Parent.Cwd)
	})
}

func TestStartWithCancelledContextSpawnsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "spawned")
	h := newHarness(t, Config{Command: "/bin/sh", Args: []string{"-c", "touch " + marker}}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := h.p.Start(ctx, request(t, "hi"))
	require.EqualError(t, err, "subagent request was aborted before the SDK child started")
	require.ErrorIs(t, err, ErrAbortedBeforeStart)
	require.ErrorIs(t, err, context.Canceled)
	_, statErr := os.Stat(marker)
	assert.True(t, errors.Is(statErr, os.ErrNotExist), "the command must not have run")
}

func TestCancelDuringHandshakeRejectsAfterReap(t *testing.T) {
	h := newHarness(t, badConfig("hang"), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := h.p.Start(ctx, request(t, "hi"))
		errc <- err
	}()
	pid := h.startedPID(t)
	cancel()
	err := <-errc
	require.EqualError(t, err, "subagent request was aborted before the SDK child started")
	require.ErrorIs(t, err, ErrAbortedBeforeStart)
	require.ErrorIs(t, err, context.Canceled)
	requireGone(t, pid) // rejected only after the reap
}

// A deadline that passes during the handshake reads as the deadline, not as a cancel, and
// keeps the contract's message.
func TestDeadlineDuringHandshakeIsDeadlineExceeded(t *testing.T) {
	h := newHarness(t, badConfig("hang"), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := h.p.Start(ctx, request(t, "hi"))
	require.EqualError(t, err, "subagent request was aborted before the SDK child started")
	require.ErrorIs(t, err, ErrAbortedBeforeStart)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, context.Canceled)
}

func TestHandshakeTimeoutReapsTheChild(t *testing.T) {
	cfg := badConfig("hang")
	cfg.HandshakeTimeoutMs = 100
	h := newHarness(t, cfg, Options{})
	_, err := h.p.Start(context.Background(), request(t, "hi"))
	var te *HandshakeTimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, fmt.Sprintf(`subagent-dsh-sdk "dsh-sdk": initialize: the child runtime (pid %d) did not complete the handshake within 100ms; it was stopped`, te.PID), err.Error())
	requireGone(t, te.PID)
}

func TestExitBeforeHandshake(t *testing.T) {
	h := newHarness(t, badConfig("exit3"), Options{})
	_, err := h.p.Start(context.Background(), request(t, "hi"))
	require.EqualError(t, err, "DeepSeek Harness runtime exited\nexit code: 3\nstderr tail:\nbadchild: fatal: cannot load configuration")
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 3, ee.State.ExitCode())
	requireGone(t, ee.PID)
}

func TestSpawnFailure(t *testing.T) {
	h := newHarness(t, Config{Command: filepath.Join(t.TempDir(), "missing")}, Options{})
	_, err := h.p.Start(context.Background(), request(t, "hi"))
	require.ErrorIs(t, err, os.ErrNotExist)
	var se *SpawnError
	require.ErrorAs(t, err, &se)
	assert.False(t, se.Transient(), "a missing command stays missing: no retry can fix it")
	assert.True(t, (&SpawnError{Err: fmt.Errorf("fork: %w", syscall.EAGAIN)}).Transient(), "out of processes: a retry may fit")
}

func TestHandshakeWithoutServerIdentity(t *testing.T) {
	h := newHarness(t, badConfig("noidentity"), Options{})
	_, err := h.p.Start(context.Background(), request(t, "hi"))
	require.EqualError(t, err, `initialize returned no server identity: {"hello":"world"}`)
	requireGone(t, h.startedPID(t))
}

func TestStopReasons(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		stop     subagent.StopReason
		text     string
		warnings []string
	}{
		// Text streamed before the receipt is never attributed; the turn arrives before the
		// session/prompt response.
		{"prereceipt", subagent.StopCompleted, "ok", nil},
		// Idle without a turn is an error, but no failure of the transport.
		{"noturn", subagent.StopError, "", nil},
		// A malformed final message is a protocol error that keeps the earlier deltas.
		{"malformed", subagent.StopError, "partial ", []string{`subagent-dsh-sdk "dsh-sdk": child run failed (error): protocol error: assistant/message content must be an array of objects with a string type: {"message":{"content":"not an array","id":"a1","role":"assistant"},"step":0,"turn":0}`}},
		// The child dies after publish: a transport failure.
		{"die", subagent.StopError, "partial ", []string{`subagent-dsh-sdk "dsh-sdk": child run failed (error): JSON-RPC input closed`}},
		{"nomessageid", subagent.StopError, "", []string{`subagent-dsh-sdk "dsh-sdk": child run failed (error): session/prompt returned no message id: {"messageId":42}`}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			h := newHarness(t, badConfig(tc.mode), Options{})
			r := h.start(t, request(t, "hi"))
			res, err := r.Result(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.stop, res.StopReason)
			assert.Equal(t, tc.text, text(res))
			assert.Equal(t, tc.warnings, h.warnings())

			again, err := r.Result(context.Background())
			require.NoError(t, err)
			assert.Equal(t, res, again, "Result is memoized")
			require.NoError(t, r.Dispose(context.Background()))
			assert.Equal(t, res, mustResult(t, r), "Dispose after settling keeps the result")
			assert.Equal(t, tc.warnings, h.warnings(), "still exactly the one warning")
			requireGone(t, r.PID())
		})
	}
}

func mustResult(t *testing.T, r *Run) subagent.Result {
	t.Helper()
	res, err := r.Result(context.Background())
	require.NoError(t, err)
	return res
}

// waitStreaming waits until the run has streamed some text.
func waitStreaming(t *testing.T, r *Run) {
	t.Helper()
	require.Eventually(t, func() bool { return r.Progress().StreamedBytes > 0 }, 10*time.Second, 5*time.Millisecond)
}

func TestDisposeMidRunSettlesAborted(t *testing.T) {
	h := newHarness(t, badConfig("stall"), Options{})
	r := h.start(t, request(t, "hi"))
	resc := make(chan subagent.Result, 1)
	go func() { resc <- mustResult(t, r) }()
	waitStreaming(t, r)
	assert.Equal(t, Progress{Phase: PhaseRunning, Steps: 1, StreamedBytes: 14, Tail: "partial answer"}, r.Progress())

	require.NoError(t, r.Dispose(context.Background()))
	res := <-resc
	assert.Equal(t, subagent.StopAborted, res.StopReason)
	assert.Equal(t, "partial answer", text(res), "partial output survives abort")
	requireGone(t, r.PID())
	assert.Equal(t, 0, r.ExitState().ExitCode(), "the child exited on the shutdown request")
	msgs := h.messages()
	assert.Contains(t, msgs, "dispose: shutdown request")
	assert.NotContains(t, msgs, "dispose: SIGTERM to process group", "no signal for a child that exits on shutdown")
	assert.Empty(t, h.warnings())

	require.NoError(t, r.Dispose(context.Background()), "second dispose: same outcome")
	assert.Equal(t, res, mustResult(t, r))
}

func TestDisposeBeforeResult(t *testing.T) {
	h := newHarness(t, badConfig("stall"), Options{})
	r := h.start(t, request(t, "hi"))
	require.NoError(t, r.Dispose(context.Background()))
	res := mustResult(t, r)
	assert.Equal(t, subagent.StopAborted, res.StopReason)
	assert.Equal(t, []session.Block{}, res.Output)
	requireGone(t, r.PID())
}

func TestResultContextCancelAborts(t *testing.T) {
	h := newHarness(t, badConfig("stall"), Options{})
	r := h.start(t, request(t, "hi"))
	ctx, cancel := context.WithCancel(context.Background())
	resc := make(chan subagent.Result, 1)
	go func() {
		res, _ := r.Result(ctx)
		resc <- res
	}()
	waitStreaming(t, r)
	cancel()
	res := <-resc
	assert.Equal(t, subagent.Result{Output: []session.Block{session.Text("partial answer")}, StopReason: subagent.StopAborted}, res)
	assert.Nil(t, r.ExitState(), "the child runs until Dispose")
	require.NoError(t, r.Dispose(context.Background()))
	requireGone(t, r.PID())
	assert.Equal(t, res, mustResult(t, r))
}

func TestLadderEscalation(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		signal syscall.Signal
		steps  []string
		never  []string
	}{
		{"ignore-eof", syscall.SIGTERM,
			[]string{"dispose: shutdown request", "dispose: closing stdin", "dispose: SIGTERM to process group"},
			[]string{"dispose: SIGKILL to process group"}},
		{"ignore-term", syscall.SIGKILL,
			[]string{"dispose: shutdown request", "dispose: closing stdin", "dispose: SIGTERM to process group", "dispose: SIGKILL to process group"},
			nil},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg := badConfig(tc.mode)
			cfg.ShutdownTimeoutMs, cfg.DisposeEOFGraceMs, cfg.DisposeGraceMs = 50, 100, 1000
			h := newHarness(t, cfg, Options{})
			r := h.start(t, request(t, "hi"))
			resc := make(chan subagent.Result, 1)
			go func() { resc <- mustResult(t, r) }()
			waitStreaming(t, r)
			require.NoError(t, r.Dispose(context.Background()))
			assert.Equal(t, subagent.StopAborted, (<-resc).StopReason)

			requireGone(t, r.PID())
			ws := r.ExitState().Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled())
			assert.Equal(t, tc.signal, ws.Signal())
			msgs := h.messages()
			assert.True(t, containsAll(msgs, tc.steps...), "ladder steps: %v", msgs)
			for _, m := range tc.never {
				assert.NotContains(t, msgs, m)
			}
			assert.Empty(t, h.warnings())
		})
	}
}

func TestDisposeWithDoneContextKills(t *testing.T) {
	cfg := badConfig("ignore-term")
	cfg.ShutdownTimeoutMs, cfg.DisposeEOFGraceMs, cfg.DisposeGraceMs = 60_000, 60_000, 60_000
	h := newHarness(t, cfg, Options{})
	r := h.start(t, request(t, "hi"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, r.Dispose(ctx))
	requireGone(t, r.PID())
	assert.Equal(t, syscall.SIGKILL, r.ExitState().Sys().(syscall.WaitStatus).Signal())
}

func TestGarbageAndHugeLines(t *testing.T) {
	h := newHarness(t, badConfig("garbage"), Options{MaxFrameSize: 1 << 20})
	r := h.start(t, request(t, "hi"))
	res := mustResult(t, r)
	require.Equal(t, subagent.StopCompleted, res.StopReason)
	var rep echoReport
	require.NoError(t, json.Unmarshal([]byte(text(res)), &rep), "the run after the garbage is intact")
	assert.Len(t, rep.Initialize, 1)
	ignored := h.logs.FilterMessage("child frame ignored").All()
	assert.GreaterOrEqual(t, len(ignored), 5, "every garbage line is reported")
	var reasons []string
	for _, e := range ignored {
		reasons = append(reasons, e.ContextMap()["error"].(string))
	}
	assert.True(t, slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(s, "frame exceeds maximum size") }),
		"the 10 MB line is discarded while streaming: %v", reasons)
	assert.Empty(t, h.warnings())
}

func TestRunOptionsID(t *testing.T) {
	h := newHarness(t, badConfig("echo"), Options{})
	r, err := h.p.StartRun(context.Background(), request(t, "hi"), RunOptions{ID: "run-42"})
	require.NoError(t, err)
	defer r.Dispose(context.Background())
	assert.Equal(t, "run-42", r.ID())
	assert.Equal(t, subagent.StopCompleted, mustResult(t, r).StopReason)

	other := h.start(t, request(t, "hi"))
	assert.Len(t, other.ID(), 36, "a fresh UUID by default")
}

func TestChildLeadsItsOwnProcessGroup(t *testing.T) {
	h := newHarness(t, badConfig("stall"), Options{})
	r := h.start(t, request(t, "hi"))
	pgid, err := syscall.Getpgid(r.PID())
	require.NoError(t, err)
	assert.Equal(t, r.PID(), pgid, "the ladder signals the whole group")
}

// A caller's logger (an activity's, with its workflow ids) carries the run's lines, so the
// one warning of a failed run can be traced to its workflow at 3 a.m.
func TestRunLoggerCarriesTheCallersFields(t *testing.T) {
	h := newHarness(t, badConfig("die"), Options{})
	core, logs := observer.New(zapcore.DebugLevel)
	caller := zap.New(core).With(zap.String("workflowId", "wf-1"))
	r, err := h.p.StartRun(context.Background(), request(t, "hi"), RunOptions{ID: "run-1", Logger: caller})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Dispose(context.Background()) })
	res, err := r.Result(context.Background())
	require.NoError(t, err)
	require.Equal(t, subagent.StopError, res.StopReason)

	warnings := logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warnings, 1)
	assert.Equal(t, `subagent-dsh-sdk "dsh-sdk": child run failed (error): JSON-RPC input closed`, warnings[0].Message)
	fields := warnings[0].ContextMap()
	assert.Equal(t, "wf-1", fields["workflowId"])
	assert.Equal(t, "run-1", fields["run"])
	assert.Equal(t, "dsh-sdk", fields["provider"])
	assert.Empty(t, h.warnings(), "the provider's own logger got none of the run's lines")
}
