package activities_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// signals records the sdk-published signals of RunSDKChild.
type signals struct {
	mu  sync.Mutex
	got []workflows.Published
}

func (s *signals) record(_ context.Context, _ string, pub workflows.Published) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, pub)
	return nil
}

func (s *signals) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func runSDK(e *env, runID string, req subagent.Request) (workflows.Outcome, error) {
	v, err := e.ExecuteActivity(workflows.ActivityRunSDKChild, workflows.SDKInput{
		Provider: subagent.ProviderSDK, RunID: runID, Request: req, WorkflowID: "subagent-" + runID,
	})
	if err != nil {
		return workflows.Outcome{}, err
	}
	var out workflows.Outcome
	return out, v.Get(&out)
}

func TestRunSDKChildThroughTheRealChildRuntime(t *testing.T) {
	f := newFixture(t, `{"text": "hello from the sdk child", "chunks": 3}`)
	a := f.activities()
	var sig signals
	activities.SetSignal(a, sig.record)
	e := newEnv(t, a, worker.Options{})

	out, err := runSDK(e, "run-1", request("say hello"))
	require.NoError(t, err)
	assert.Positive(t, out.Usage.InputTokens, "the child's usage is reported, as an in-process run's")
	require.NotNil(t, out.Digest, "the digest is built from the events the runtime reported")
	assert.Equal(t, "hello from the sdk child", out.Digest.Answer)
	assert.Equal(t, subagent.StopCompleted, out.Digest.StopReason)
	assert.Equal(t, 1, out.Digest.TotalSteps)
	assert.Equal(t, out.Usage.InputTokens, out.Digest.InputTokens)
	out.Digest = nil
	// The scripted model counts a token per 4 runes of its answer: 24 runes.
	assert.Equal(t, workflows.Outcome{ChildID: "run-1", Depth: 1, Result: subagent.Result{
		Output: []session.Block{session.Text("hello from the sdk child")}, StopReason: subagent.StopCompleted,
	}, Usage: session.Usage{InputTokens: out.Usage.InputTokens, OutputTokens: 6}}, out)
	assert.Equal(t, []workflows.Published{{ChildID: "run-1", Depth: 1, Model: "script.json"}}, sig.got,
		"published once, after the handshake, with the parent's cwd from the store")
	assert.NotEmpty(t, e.progress())
}

func TestRunSDKChildCancelledReturnsTheAbortedOutcome(t *testing.T) {
	f := newFixture(t, `{"text": "never finished", "chunks": 2, "delayMs": 30000}`)
	a := f.activities()
	var sig signals
	activities.SetSignal(a, sig.record)
	bg, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e := newEnv(t, a, worker.Options{BackgroundActivityContext: bg})

	errc := make(chan error, 1)
	go func() {
		_, err := runSDK(e, "run-1", request("take your time"))
		errc <- err
	}()
	waitFor(t, "publication", func() bool { return sig.count() == 1 })
	cancel(temporal.NewCanceledError()) // as the SDK cancels an activity the workflow cancelled
	err := receive(t, "the run", errc)
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled), "got %T: %v", err, err)
	require.True(t, canceled.HasDetails())
	var out workflows.Outcome
	require.NoError(t, canceled.Details(&out))
	assert.Equal(t, "run-1", out.ChildID)
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
}

func TestRunSDKChildWorkerStopIsRetryable(t *testing.T) {
	f := newFixture(t, `{"text": "never finished", "chunks": 2, "delayMs": 30000}`)
	a := f.activities()
	var sig signals
	activities.SetSignal(a, sig.record)
	stop := make(chan struct{})
	e := newEnv(t, a, worker.Options{})
	e.SetWorkerStopChannel(stop)

	errc := make(chan error, 1)
	go func() {
		_, err := runSDK(e, "run-1", request("take your time"))
		errc <- err
	}()
	waitFor(t, "publication", func() bool { return sig.count() == 1 })
	close(stop)
	appErr := requireApplicationError(t, receive(t, "the run", errc))
	assert.Equal(t, activities.TypeWorkerStopping, appErr.Type())
	assert.False(t, appErr.NonRetryable())
}

func TestRunSDKChildWithoutCommandIsARejection(t *testing.T) {
	f := newFixture(t)
	e := newEnv(t, f.activities(func(c *activities.Config) { c.SDK.Command = "" }), worker.Options{})
	_, err := runSDK(e, "run-1", request("hello"))
	appErr := requireApplicationError(t, err)
	assert.Equal(t, activities.RuleNoSDKProvider, appErr.Type())
	assert.True(t, appErr.NonRetryable())
}

// TestRunSDKChildFollowsTheParentsPolicy: the parent's read-only sandbox reaches the sdk
// child (its write is refused, no file appears) and the parent's subtree cap bounds it.
func TestRunSDKChildFollowsTheParentsPolicy(t *testing.T) {
	f := newFixture(t,
		`{"toolCalls": [{"name": "write_file", "input": {"path": "escaped.txt", "content": "x"}}]}`,
		`{"text": "tried"}`)
	ev, err := session.NewEvent(session.TypeSandboxMode, session.SandboxModeData{Mode: "read-only", Source: "user"})
	require.NoError(t, err)
	require.NoError(t, f.store.Append(context.Background(), parentID, ev))
	a := f.activities()
	activities.SetSignal(a, (&signals{}).record)
	e := newEnv(t, a, worker.Options{})

	out, err := runSDK(e, "run-ro", request("write"))
	require.NoError(t, err)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.NoFileExists(t, filepath.Join(f.cwd, "escaped.txt"))

	// A parent at its subtree cap cannot delegate to an sdk child either.
	one := int64(1)
	require.NoError(t, f.store.Create(context.Background(), session.Header{
		ID: "capped", Cwd: f.cwd, Origin: session.OriginSubagent, ParentSession: parentID,
		DelegationDepth: 1, MaxDepth: &one,
	}))
	req := request("go deeper")
	req.Parent.SessionID = "capped"
	_, err = runSDK(e, "run-deep", req)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), "subagent depth 2 exceeds maxDepth 1")
}

// TestRunSDKChildHandshakeFailureIsFinal: a child runtime that stays silent, writes garbage
// instead of answering initialize, ignores SIGTERM and leaves a grandchild, exits before its
// handshake or cannot be run at all fails RunSDKChild with a non-retryable TypeSDKStart
// error carrying the provider's message, so the run ends at its first attempt instead of
// paying the handshake timeout and the kill ladder once per retry.
func TestRunSDKChildHandshakeFailureIsFinal(t *testing.T) {
	for _, tc := range []struct {
		name, command, script, want string
	}{
		{"silent", "/bin/sh", "exec sleep 3600", "did not complete the handshake within 300ms; it was stopped"},
		{"garbage", "/bin/sh", "while :; do echo 'not json at all'; sleep 0.01; done", "did not complete the handshake within 300ms; it was stopped"},
		{"ignores SIGTERM, leaves a grandchild", "/bin/sh", "trap '' TERM; sleep 3600 & wait", "did not complete the handshake within 300ms; it was stopped"},
		{"exits", "/bin/sh", "echo 'cannot load configuration' >&2; exit 3", "DeepSeek Harness runtime exited\nexit code: 3\nstderr tail:\ncannot load configuration"},
		{"missing command", "/nonexistent/child-runtime", "", "spawn /nonexistent/child-runtime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			e := newEnv(t, f.activities(func(c *activities.Config) {
				c.SDK.Command, c.SDK.Args = tc.command, []string{"-c", tc.script}
				c.SDK.HandshakeTimeoutMs, c.SDK.DisposeEOFGraceMs, c.SDK.DisposeGraceMs = 300, 200, 200
			}), worker.Options{})
			_, err := runSDK(e, "run-1", request("hello"))
			appErr := requireApplicationError(t, err)
			assert.Equal(t, activities.TypeSDKStart, appErr.Type())
			assert.True(t, appErr.NonRetryable(), "a retry meets the same child")
			assert.Contains(t, appErr.Error(), tc.want)
		})
	}
}
