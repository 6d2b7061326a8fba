package activities_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

func publish(t *testing.T, e *env, childID string, req subagent.Request) workflows.Published {
	t.Helper()
	v, err := e.ExecuteActivity(workflows.ActivityPublish, workflows.ChildInput{
		Provider: subagent.ProviderSpawn, ChildID: childID, Request: req,
	})
	require.NoError(t, err)
	var pub workflows.Published
	require.NoError(t, v.Get(&pub))
	return pub
}

func drive(e *env, childID string, req subagent.Request) (workflows.DriveSummary, error) {
	v, err := e.ExecuteActivity(workflows.ActivityDrive, workflows.ChildInput{
		Provider: subagent.ProviderSpawn, ChildID: childID, Request: req,
	})
	if err != nil {
		return workflows.DriveSummary{}, err
	}
	var sum workflows.DriveSummary
	return sum, v.Get(&sum)
}

func readResult(t *testing.T, e *env, childID string, req subagent.Request, cancelled bool) workflows.Outcome {
	t.Helper()
	v, err := e.ExecuteActivity(workflows.ActivityReadResult, workflows.ReadResultInput{
		ChildID: childID, Request: req, Cancelled: cancelled,
	})
	require.NoError(t, err)
	var out workflows.Outcome
	require.NoError(t, v.Get(&out))
	return out
}

func TestCreateRootSessionIsIdempotent(t *testing.T) {
	f := newFixture(t)
	e := newEnv(t, f.activities(), worker.Options{})
	in := workflows.CreateRootSessionInput{SessionID: "root-1", Root: workflows.RootSession{
		Cwd: f.cwd, Route: session.Route{Provider: model.ProviderScripted, Model: "script.json"}, Preset: "default",
	}}
	for range 2 {
		v, err := e.ExecuteActivity(workflows.ActivityCreateRootSession, in)
		require.NoError(t, err)
		var ref subagent.ParentRef
		require.NoError(t, v.Get(&ref))
		assert.Equal(t, "root-1", ref.SessionID)
		assert.Equal(t, f.cwd, ref.Cwd)
	}
	hd, events, err := f.store.Load(context.Background(), "root-1")
	require.NoError(t, err)
	assert.Equal(t, int64(0), hd.DelegationDepth)
	assert.Equal(t, "default", hd.AgentPreset)
	assert.Equal(t, &session.Route{Provider: model.ProviderScripted, Model: "script.json"}, hd.Route)
	assert.Empty(t, events)

	in.Root.Cwd = "relative/dir"
	_, err = e.ExecuteActivity(workflows.ActivityCreateRootSession, in)
	appErr := requireApplicationError(t, err)
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, subagent.RuleRelativeCwd, appErr.Type())
}

func TestPublishIsIdempotentForAChildID(t *testing.T) {
	f := newFixture(t)
	e := newEnv(t, f.activities(), worker.Options{})
	req := request("hello")
	first := publish(t, e, "child-1", req)
	logged := f.events("child-1")
	second := publish(t, e, "child-1", req)

	assert.Equal(t, workflows.Published{ChildID: "child-1", Depth: 1, Model: "script.json"}, first)
	assert.Equal(t, first, second)
	assert.Equal(t, logged, f.events("child-1"), "the retry wrote nothing")
	hd, _, err := f.store.Load(context.Background(), "child-1")
	require.NoError(t, err)
	assert.Equal(t, parentID, hd.ParentSession)
	assert.Equal(t, session.OriginSubagent, hd.Origin)
}

func TestPublishDepthRejectionIsNonRetryableWithTheExactMessage(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.store.Create(context.Background(), session.Header{
		ID: "deep", Cwd: f.cwd, DelegationDepth: 2,
	}))
	e := newEnv(t, f.activities(), worker.Options{})
	req := request("hello")
	req.Parent.SessionID = "deep"
	maxDepth := int64(2)
	req.MaxDepth = &maxDepth

	_, err := e.ExecuteActivity(workflows.ActivityPublish, workflows.ChildInput{
		Provider: subagent.ProviderSpawn, ChildID: "too-deep", Request: req,
	})
	appErr := requireApplicationError(t, err)
	assert.Equal(t, "subagent depth 3 exceeds maxDepth 2", appErr.Message())
	assert.Equal(t, subagent.RuleDepthExceeded, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	_, _, err = f.store.Load(context.Background(), "too-deep")
	assert.ErrorIs(t, err, session.ErrNotFound, "a rejection leaves nothing behind")
}

func TestPublishUnknownToolIsARejection(t *testing.T) {
	f := newFixture(t)
	e := newEnv(t, f.activities(), worker.Options{})
	req := request("hello")
	req.ToolFilter = &subagent.ToolFilter{Allow: []string{"no_such_tool"}}
	_, err := e.ExecuteActivity(workflows.ActivityPublish, workflows.ChildInput{
		Provider: subagent.ProviderSpawn, ChildID: "c", Request: req,
	})
	appErr := requireApplicationError(t, err)
	assert.Equal(t, activities.RuleUnknownTool, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, appErr.Message(), `tools.restrict() names unknown global tool "no_such_tool"`)
}

func TestDriveCompletesAndHeartbeatsProgress(t *testing.T) {
	f := newFixture(t, `{"text": "hello from the child", "chunks": 4, "delayMs": 200}`)
	e := newEnv(t, f.activities(), worker.Options{})
	req := request("say hello")
	pub := publish(t, e, "child-1", req)

	sum, err := drive(e, "child-1", req)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Steps)
	assert.Equal(t, int64(len("hello from the child")), sum.StreamedBytes)

	beats := e.progress()
	require.NotEmpty(t, beats)
	var sawText bool
	for _, p := range beats {
		assert.LessOrEqual(t, len(p.Tail), subagent.MaxTail)
		if p.Steps == 1 && p.StreamedBytes > 0 && p.Tail != "" {
			sawText = true
		}
	}
	assert.True(t, sawText, "a heartbeat carried streamed text: %+v", beats)

	out := readResult(t, e, "child-1", req, false)
	assert.Positive(t, out.Usage.InputTokens, "the turn's usage is summed from the log")
	assert.Positive(t, out.Usage.OutputTokens)
	require.NotNil(t, out.Digest, "the result carries the digest of the child's log")
	assert.Equal(t, "hello from the child", out.Digest.Answer)
	assert.Equal(t, 1, out.Digest.TotalSteps)
	assert.Equal(t, out.Usage.OutputTokens, out.Digest.OutputTokens)
	out.Usage, out.Digest = session.Usage{}, nil
	assert.Equal(t, workflows.Outcome{ChildID: "child-1", Depth: pub.Depth, Result: subagent.Result{
		Output: []session.Block{session.Text("hello from the child")}, StopReason: subagent.StopCompleted,
	}}, out)
}

// TestDriveWhereTheCwdIsMissing: a drive that lands on a host without its child's cwd fails
// non-retryable, naming the host and the path, and runs nothing.
func TestDriveWhereTheCwdIsMissing(t *testing.T) {
	f := newFixture(t, `{"toolCalls": [{"name": "write_file", "input": {"path": "x.txt", "content": "x"}}]}`, `{"text": "done"}`)
	e := newEnv(t, f.activities(), worker.Options{})
	req := request("write")
	publish(t, e, "child-1", req)
	require.NoError(t, os.RemoveAll(f.cwd))

	_, err := drive(e, "child-1", req)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.TypeWorkspaceMissing, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	host, _ := os.Hostname()
	assert.Contains(t, appErr.Message(), "cwd "+f.cwd+" does not exist on host "+host)
	assert.NoDirExists(t, f.cwd, "no tool ran")
}

func TestDriveCancelledAbortsTheTurnWithCauseParent(t *testing.T) {
	f := newFixture(t, `{"text": "never finished", "chunks": 2, "delayMs": 30000}`)
	bg, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e := newEnv(t, f.activities(), worker.Options{BackgroundActivityContext: bg})
	req := request("take your time")
	publish(t, e, "child-1", req)

	errc := make(chan error, 1)
	go func() {
		_, err := drive(e, "child-1", req)
		errc <- err
	}()
	waitFor(t, "the child's step", func() bool { return f.hasEvent("child-1", session.TypeStepStart) })
	cancel(temporal.NewCanceledError()) // as the SDK cancels an activity the workflow cancelled
	err := receive(t, "the drive", errc)
	assert.True(t, temporal.IsCanceledError(err), "got %T: %v", err, err)

	ends := turnEnds(t, f.events("child-1"))
	require.Len(t, ends, 1)
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent}, ends[0].Reason)

	read := newEnv(t, f.activities(), worker.Options{})
	out := readResult(t, read, "child-1", req, true)
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
	assert.Equal(t, "child-1", out.ChildID)
}

func TestDriveWorkerStopLeavesTheTurnPendingAndTheRetryResumesIt(t *testing.T) {
	f := newFixture(t,
		`{"toolCalls": [{"name": "count"}, {"name": "gate"}]}`,
		`{"text": "all done"}`,
	)
	stop := make(chan struct{})
	first := newEnv(t, f.activities(), worker.Options{})
	first.SetWorkerStopChannel(stop)
	req := request("count, then wait at the gate")
	publish(t, first, "child-1", req)

	errc := make(chan error, 1)
	go func() {
		_, err := drive(first, "child-1", req)
		errc <- err
	}()
	receive(t, "the gate tool", f.gate.entered)
	close(stop)
	err := receive(t, "the drive", errc)
	appErr := requireApplicationError(t, err)
	assert.Equal(t, activities.TypeWorkerStopping, appErr.Type())
	assert.False(t, appErr.NonRetryable(), "the retry resumes the drive")

	events := f.events("child-1")
	assert.Empty(t, turnEnds(t, events), "the turn stays unfinished")
	assert.Equal(t, session.TypeToolResult, events[len(events)-1].Type, "count's result is stored, gate's is not")
	require.Equal(t, 1, counter(t, f.cwd))

	// The retry, on another worker: fresh activities over the same store.
	second := newEnv(t, f.activities(), worker.Options{})
	second.SetHeartbeatDetails(workflows.Progress{Phase: "running", Steps: 1})
	sum, err := drive(second, "child-1", req)
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Steps, "steps count the resumed drive's and the earlier one's")
	assert.Equal(t, 1, counter(t, f.cwd), "the stored tool call ran once")

	ends := turnEnds(t, f.events("child-1"))
	require.Len(t, ends, 1)
	assert.Equal(t, session.EndCompleted, ends[0].Reason.Kind)
	out := readResult(t, second, "child-1", req, false)
	assert.Equal(t, subagent.Result{Output: []session.Block{session.Text("all done")}, StopReason: subagent.StopCompleted}, out.Result)
}

func requireApplicationError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an ApplicationError, got %T: %v", err, err)
	return appErr
}

// TestDriveOnAWorkerWithAnotherStore: a drive that lands on a worker whose store does not
// hold the published child (two hosts with separate stores on one queue) fails at once and
// non-retryable, saying why, instead of retrying "session not found" for hours.
func TestDriveOnAWorkerWithAnotherStore(t *testing.T) {
	f := newFixture(t, `{"text": "never"}`)
	req := request("hello")
	publish(t, newEnv(t, f.activities(), worker.Options{}), "child-1", req)

	other := newFixture(t)
	_, err := drive(newEnv(t, other.activities(), worker.Options{}), "child-1", req)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, activities.TypeSessionMissing, appErr.Type())
	assert.Contains(t, appErr.Message(), "separate session stores")
}

// TestDigestLevels: a worker at --digest names shows the child's steps and tool names but
// none of its tool inputs, errors or answer, in the result and in the heartbeats; at off it
// shows nothing. A bad level is refused when the activities are built.
func TestDigestLevels(t *testing.T) {
	for _, level := range []subagent.DigestLevel{subagent.DigestNames, subagent.DigestOff} {
		t.Run(string(level), func(t *testing.T) {
			f := newFixture(t, `{"toolCalls": [{"name": "read_file", "input": {"path": "missing.txt"}}]}`,
				`{"text": "the private answer", "delayMs": 200}`)
			e := newEnv(t, f.activities(func(c *activities.Config) { c.Digest = level }), worker.Options{})
			req := request("read")
			publish(t, e, "child-1", req)
			_, err := drive(e, "child-1", req)
			require.NoError(t, err)
			out := readResult(t, e, "child-1", req, false)
			var lastTools []string
			for _, p := range e.progress() {
				if p.LastTool != "" {
					lastTools = append(lastTools, p.LastTool)
				}
			}
			if level == subagent.DigestOff {
				assert.Nil(t, out.Digest)
				assert.Empty(t, lastTools)
				return
			}
			require.NotNil(t, out.Digest)
			assert.Equal(t, subagent.DigestNames, out.Digest.Level)
			assert.Empty(t, out.Digest.Answer)
			require.Len(t, out.Digest.Steps, 2)
			assert.Equal(t, []subagent.DigestTool{{Name: "read_file", Result: subagent.ToolResultError,
				DurationMs: out.Digest.Steps[0].Tools[0].DurationMs}}, out.Digest.Steps[0].Tools)
			require.NotEmpty(t, lastTools, "a heartbeat during the second step names the first step's tool")
			assert.Equal(t, "read_file: error", lastTools[len(lastTools)-1])
		})
	}
	f := newFixture(t)
	_, err := activities.New(activities.Config{Store: f.store, Models: model.NewDefaultRegistry(), Tools: &tools.Registry{}, Digest: "verbose"})
	assert.ErrorContains(t, err, `digest level "verbose"`)
}

// TestReadTranscriptWithheldBelowFull: a worker at --digest names or off does not return
// transcripts through Temporal, whose history would keep the tool inputs it withholds.
func TestReadTranscriptWithheldBelowFull(t *testing.T) {
	for _, level := range []subagent.DigestLevel{subagent.DigestNames, subagent.DigestOff} {
		f := newFixture(t, `{"text": "hi"}`)
		e := newEnv(t, f.activities(func(c *activities.Config) { c.Digest = level }), worker.Options{})
		_, err := e.ExecuteActivity(workflows.ActivityReadTranscript, workflows.TranscriptInput{ChildID: "c", Provider: subagent.ProviderSpawn})
		appErr := requireApplicationError(t, err)
		assert.Equal(t, activities.TypeTranscriptWithheld, appErr.Type())
		assert.True(t, appErr.NonRetryable())
		assert.Contains(t, appErr.Message(), "digest level is "+string(level))
	}
	f := newFixture(t, `{"text": "hi"}`)
	e := newEnv(t, f.activities(), worker.Options{})
	req := request("hello")
	publish(t, e, "child-1", req)
	_, err := drive(e, "child-1", req)
	require.NoError(t, err)
	v, err := e.ExecuteActivity(workflows.ActivityReadTranscript, workflows.TranscriptInput{ChildID: "child-1", Provider: subagent.ProviderSpawn})
	require.NoError(t, err)
	var res workflows.TranscriptResult
	require.NoError(t, v.Get(&res))
	require.NotNil(t, res.Transcript)
	assert.Equal(t, subagent.EntryPrompt, res.Transcript.Entries[0].Kind)
	v, err = e.ExecuteActivity(workflows.ActivityReadTranscript, workflows.TranscriptInput{ChildID: "gone", Provider: subagent.ProviderSpawn})
	require.NoError(t, err)
	res = workflows.TranscriptResult{}
	require.NoError(t, v.Get(&res))
	assert.True(t, res.Missing)
}
