package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

func TestInProcessRunCompletes(t *testing.T) {
	h := newHarness(t)
	u := h.sendUpdate()
	in := spawnInput()
	h.run(t, in)

	require.NoError(t, h.env.GetWorkflowError())
	var out Outcome
	require.NoError(t, h.env.GetWorkflowResult(&out))
	assert.Equal(t, Outcome{ChildID: "child-1", Depth: 2, Result: subagent.Result{
		Output: []session.Block{session.Text("done")}, StopReason: subagent.StopCompleted},
		Usage: session.Usage{InputTokens: 30, OutputTokens: 4}}, out)

	pub, err := u.get(t)
	require.NoError(t, err)
	assert.Equal(t, "child-1", pub.ChildID)
	assert.Equal(t, int64(2), pub.Depth)
	assert.NotEmpty(t, pub.RunID, "the update answers with the workflow run id")

	assert.Equal(t, []string{ActivityPublish, ActivityDrive, ActivityReadResult}, h.fakes.Calls())
	assert.Equal(t, []string{ActivityPublish, ActivityReadResult}, h.fakes.Local(), "the short steps run as local activities")
	owner := h.fakes.publish[0].Owner
	wfID, firstRun, _ := strings.Cut(owner, "/")
	assert.Equal(t, "default-test-workflow-id", wfID, "Publish records the run's owner: its workflow id…")
	assert.NotEmpty(t, firstRun, "…and the first run id of its chain, which a reset keeps")
	assert.Equal(t, ChildInput{Provider: subagent.ProviderSpawn, ChildID: "child-1", Request: in.Request, Owner: owner}, h.fakes.publish[0])
	assert.Equal(t, ChildInput{Provider: subagent.ProviderSpawn, ChildID: "child-1", Request: in.Request}, h.fakes.drives[0])
	assert.Equal(t, ReadResultInput{ChildID: "child-1", Request: in.Request}, h.fakes.reads[0])

	assert.Equal(t, map[string]any{
		"SubagentProvider": "spawn",
		"SubagentModel":    "model-a",
		"SubagentParent":   "parent-1",
		"SubagentBatch":    "batch-7",
		// The run's token usage, from ReadResult.
		"SubagentInputTokens":  int64(30),
		"SubagentOutputTokens": int64(4),
		"SubagentLabel":        "summarise",
		"SubagentChild":        "child-1",
		"SubagentDepth":        int64(2),
		"SubagentStopReason":   "completed",
	}, h.Attrs())
}

func TestChildIDIsGeneratedWhenNotGiven(t *testing.T) {
	h := newHarness(t)
	u := h.sendUpdate()
	in := spawnInput()
	in.ChildID = ""
	h.run(t, in)

	require.NoError(t, h.env.GetWorkflowError())
	id := h.fakes.publish[0].ChildID
	_, err := uuid.Parse(id)
	require.NoError(t, err, "the side effect generates a UUID")
	assert.Equal(t, id, h.fakes.drives[0].ChildID)
	assert.Equal(t, id, h.fakes.reads[0].ChildID)
	pub, err := u.get(t)
	require.NoError(t, err)
	assert.Equal(t, id, pub.ChildID)
}

func TestRootSessionIsCreatedWithoutParent(t *testing.T) {
	h := newHarness(t)
	h.sendUpdate()
	in := spawnInput()
	in.Request.Parent = subagent.ParentRef{}
	in.Request.AgentOptions = session.Route{}
	in.Root = &RootSession{Cwd: "/work/repo", Route: session.Route{Provider: "scripted", Model: "root-model"}, Preset: "default"}
	h.run(t, in)

	require.NoError(t, h.env.GetWorkflowError())
	assert.Equal(t, []string{ActivityCreateRootSession, ActivityPublish, ActivityDrive, ActivityReadResult}, h.fakes.Calls())
	assert.Equal(t, []string{ActivityCreateRootSession, ActivityPublish, ActivityReadResult}, h.fakes.Local())
	root := h.fakes.roots[0]
	assert.Equal(t, *in.Root, root.Root)
	assert.Equal(t, RootSessionID("child-1"), root.SessionID, "the root's id is known to the starter")
	wantParent := subagent.ParentRef{SessionID: root.SessionID, Cwd: "/work/repo"}
	assert.Equal(t, wantParent, h.fakes.publish[0].Request.Parent, "the child is published under the new root")
	assert.Equal(t, wantParent, h.fakes.drives[0].Request.Parent)
	assert.Equal(t, "root-model", h.Attrs()["SubagentModel"])
	assert.Equal(t, wantParent.SessionID, h.Attrs()["SubagentParent"])
}

func TestValidationRejectsBeforeAnythingRuns(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		edit     func(*StartInput)
		// json, when set, is the input as a caller in another language sends it, decoded as
		// the worker decodes it.
		json string
		rule string
		msg  string
	}{
		{name: "unknown provider", provider: "nope",
			rule: subagent.RuleUnknownProvider, msg: `no subagent provider registered for "nope"`},
		{name: "sdk has no outputSchema", provider: subagent.ProviderSDK,
			edit: func(in *StartInput) { in.Request.OutputSchema = json.RawMessage(`{"type": "object"}`) },
			rule: subagent.RuleUnsupportedCapability,
			msg:  `subagent provider "sdk" does not support the "outputSchema" capability`},
		{name: "bad maxDepth", provider: subagent.ProviderSpawn,
			edit: func(in *StartInput) { in.Request.MaxDepth = ptr(int64(-1)) },
			rule: subagent.RuleInvalidMaxDepth, msg: "subagent maxDepth must be a non-negative safe integer"},
		{name: "bad schema", provider: subagent.ProviderFork,
			edit: func(in *StartInput) { in.Request.OutputSchema = json.RawMessage(`{"type": "string"}`) },
			rule: subagent.RuleUnsupportedSchema,
			msg:  `unsupported JSON schema: schema.type must be "object" (structured output is object-rooted)`},
		{name: "no parent and no root", provider: subagent.ProviderSpawn,
			edit: func(in *StartInput) { in.Request.Parent = subagent.ParentRef{} },
			rule: RuleMissingParent, msg: "subagent request has no parent session and no root session to create"},
		{name: "no request", json: `{"provider": "spawn", "root": {"cwd": "/work"}}`,
			rule: subagent.RuleMissingPrompt, msg: "subagent request has no prompt: request.prompt needs at least one block"},
		{name: "an image block", json: `{"provider": "spawn", "request": {"prompt": [{"type": "image"}]}, "root": {"cwd": "/work"}}`,
			rule: subagent.RuleUnsupportedBlock, msg: `subagent request.prompt[0] has type "image": a prompt holds "text" and "tool-call" blocks only`},
		{name: "negative maxTokens", provider: subagent.ProviderSpawn,
			edit: func(in *StartInput) { in.Request.AgentOptions.MaxTokens = -5 },
			rule: subagent.RuleInvalidTokens, msg: "subagent request.agentOptions.maxTokens must be a non-negative safe integer: -5"},
		{name: "a label over the server's limit", provider: subagent.ProviderSpawn,
			edit: func(in *StartInput) { in.Request.Label = strings.Repeat("l", 100_000) },
			rule: subagent.RuleInvalidLabel, msg: "subagent request.label is 100002 bytes encoded, over the server's limit of 2048 bytes for a search attribute"},
		{name: "a childId escaping the store", provider: subagent.ProviderSpawn,
			edit: func(in *StartInput) { in.ChildID = "../../escape" },
			rule: RuleInvalidChildID, msg: `subagent childId: invalid session id "../../escape": contains a path separator`},
		{name: "a childId of 300 bytes", provider: subagent.ProviderSpawn,
			edit: func(in *StartInput) { in.ChildID = strings.Repeat("c", 300) },
			rule: RuleInvalidChildID, msg: `subagent childId: invalid session id "` + strings.Repeat("c", 80) + `…": 300 bytes, over the limit of 128`},
		{name: "a blank parent", provider: subagent.ProviderSpawn,
			edit: func(in *StartInput) { in.Request.Parent.SessionID = " " },
			rule: RuleInvalidSessionID, msg: `subagent parent session: invalid session id " ": contains ' ': an id holds letters, digits, '.', '_' and '-'`},
		{name: "a parent like a flag", provider: subagent.ProviderSpawn,
			edit: func(in *StartInput) { in.Request.Parent.SessionID = "-x" },
			rule: RuleInvalidSessionID, msg: `subagent parent session: invalid session id "-x": starts with '-'`},
		{name: "a negative timeout", json: `{"provider": "spawn", "request": {"prompt": [{"type": "text", "text": "t"}]}, "root": {"cwd": "/work"}, "timeout": "-5s"}`,
			rule: RuleInvalidTimeout, msg: `subagent timeout must be a positive duration such as "90s" or "10m" (leave it out for none): -5s`},
		{name: "a zero timeout", json: `{"provider": "spawn", "request": {"prompt": [{"type": "text", "text": "t"}]}, "root": {"cwd": "/work"}, "timeout": 0}`,
			rule: RuleInvalidTimeout, msg: `subagent timeout must be a positive duration such as "90s" or "10m" (leave it out for none): 0s`},
		{name: "a model over the server's limit", provider: subagent.ProviderSpawn,
			edit: func(in *StartInput) { in.Request.AgentOptions.Model = strings.Repeat("m", 3000) },
			rule: RuleInvalidAttribute, msg: "subagent request.agentOptions.model is 3002 bytes encoded, over the server's limit of 2048 bytes for a search attribute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			u := h.sendUpdate()
			in := spawnInput()
			in.Provider = tt.provider
			if tt.edit != nil {
				tt.edit(&in)
			}
			if tt.json != "" {
				in = StartInput{}
				require.NoError(t, json.Unmarshal([]byte(tt.json), &in))
			}
			h.run(t, in)

			assertRejected(t, h.env.GetWorkflowError(), tt.rule, tt.msg)
			_, err := u.get(t)
			assertRejected(t, err, tt.rule, tt.msg)
			assert.Empty(t, h.fakes.Calls(), "nothing is created")
			assert.Empty(t, h.fakes.Local(), "nothing is created")
			assert.Equal(t, &subagent.ValidationError{Rule: tt.rule, Message: tt.msg}, CheckInput(in), "starters refuse it up front")
		})
	}
}

// TestCheckInputPassesWhatRuns: the limits themselves pass, and a timeout left out is none.
func TestCheckInputPassesWhatRuns(t *testing.T) {
	in := spawnInput()
	in.ChildID = strings.Repeat("c", MaxSessionIDBytes)
	in.Request.Label = strings.Repeat("l", subagent.MaxAttributeBytes-2)
	assert.NoError(t, CheckInput(in))
	var decoded StartInput
	require.NoError(t, json.Unmarshal([]byte(`{"provider": "spawn", "request": {"prompt": [{"type": "text", "text": "t"}]}, "root": {"cwd": "/work"}, "timeout": null}`), &decoded))
	assert.NoError(t, CheckInput(decoded))
	require.NoError(t, json.Unmarshal([]byte(`{"provider": "spawn", "request": {"prompt": [{"type": "text", "text": "t"}]}, "root": {"cwd": "/work"}, "timeout": "90s"}`), &decoded))
	assert.NoError(t, CheckInput(decoded))
}

func TestDepthErrorFromPublishReachesTheCaller(t *testing.T) {
	h := newHarness(t)
	h.fakes.onPublish = func(context.Context, ChildInput) (Published, error) {
		return Published{}, ToApplicationError(&subagent.DepthError{Attempted: 4, Max: 3})
	}
	u := h.sendUpdate()
	in := spawnInput()
	in.Request.MaxDepth = ptr(int64(3))
	h.run(t, in)

	const msg = "subagent depth 4 exceeds maxDepth 3"
	assertRejected(t, h.env.GetWorkflowError(), subagent.RuleDepthExceeded, msg)
	_, err := u.get(t)
	assertRejected(t, err, subagent.RuleDepthExceeded, msg)
	assert.Equal(t, []string{ActivityPublish}, h.fakes.Calls(), "a rejected publish is not retried")
}

func TestUpdateAnswersAtPublishBeforeDriveEnds(t *testing.T) {
	h := newHarness(t)
	var u *updateAnswer
	sawAnswer := false
	h.fakes.onDrive = func(context.Context, ChildInput) (DriveSummary, error) {
		sawAnswer = closed(u.done)
		return DriveSummary{Steps: 1}, nil
	}
	u = h.sendUpdate()
	h.run(t, spawnInput())

	require.NoError(t, h.env.GetWorkflowError())
	assert.True(t, sawAnswer, "the caller had {runId, childId, depth} while the child was still driving")
	pub, err := u.get(t)
	require.NoError(t, err)
	assert.Equal(t, "child-1", pub.ChildID)
	assert.Equal(t, int64(2), pub.Depth)
	assert.NotEmpty(t, pub.RunID)
}

func TestCancelDuringDriveEndsCanceledWithAbortedOutcome(t *testing.T) {
	h := newHarness(t)
	driving := make(chan struct{})
	park := blockUntilCancelled(t)
	h.fakes.onDrive = func(ctx context.Context, _ ChildInput) (DriveSummary, error) {
		close(driving)
		park(ctx)
		return DriveSummary{}, temporal.NewCanceledError()
	}
	u := h.sendUpdate()
	h.whenClosed(driving, h.env.CancelWorkflow)
	h.run(t, spawnInput())

	var canceled *temporal.CanceledError
	require.ErrorAs(t, h.env.GetWorkflowError(), &canceled)
	var out Outcome
	require.NoError(t, canceled.Details(&out))
	assert.Equal(t, Outcome{ChildID: "child-1", Depth: 2, Result: subagent.Result{
		Output: []session.Block{session.Text("partial")}, StopReason: subagent.StopAborted}}, out)

	assert.Equal(t, []string{ActivityPublish, ActivityDrive, ActivityReadResult}, h.fakes.Calls())
	assert.True(t, h.fakes.reads[0].Cancelled, "the result is read as cancelled")
	assert.Equal(t, "aborted", h.Attrs()["SubagentStopReason"])
	_, err := u.get(t)
	require.NoError(t, err, "the child was published before the cancel")
}

func TestCancelBeforePublishCreatesNoChild(t *testing.T) {
	h := newHarness(t)
	u := h.sendUpdate()
	// A cancel the first workflow task already sees: the local Publish never starts.
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 0)
	h.run(t, spawnInput())

	var canceled *temporal.CanceledError
	require.ErrorAs(t, h.env.GetWorkflowError(), &canceled)
	assert.False(t, canceled.HasDetails(), "no child, no outcome")
	_, err := u.get(t)
	require.ErrorAs(t, err, &canceled)
	assert.EqualError(t, err, "subagent run was cancelled before it was published")
	assert.Empty(t, h.fakes.Calls())
	assert.Empty(t, h.Upserts(), "the start set every attribute; nothing is published")
}

func TestCancelDuringLocalPublishAbortsThePublishedChild(t *testing.T) {
	h := newHarness(t)
	publishing, cancelled := make(chan struct{}), make(chan struct{})
	h.fakes.onPublish = func(ctx context.Context, in ChildInput) (Published, error) {
		close(publishing)
		closed(cancelled)
		require.NoError(t, ctx.Err(), "a local Publish is not interrupted by the cancel")
		return Published{ChildID: in.ChildID, Depth: 2}, nil
	}
	u := h.sendUpdate()
	h.whenClosed(publishing, func() {
		h.env.CancelWorkflow()
		close(cancelled)
	})
	h.run(t, spawnInput())

	var canceled *temporal.CanceledError
	require.ErrorAs(t, h.env.GetWorkflowError(), &canceled)
	var out Outcome
	require.NoError(t, canceled.Details(&out))
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
	assert.Equal(t, []string{ActivityPublish, ActivityReadResult}, h.fakes.Calls(), "no drive, the result is read")
	assert.True(t, h.fakes.reads[0].Cancelled, "the published child is aborted")
	pub, err := u.get(t)
	require.NoError(t, err, "the child was published")
	assert.Equal(t, "child-1", pub.ChildID)
}

func TestCancelDuringLocalRootCreationCreatesNoChild(t *testing.T) {
	h := newHarness(t)
	creating := make(chan struct{})
	park := blockUntilCancelled(t)
	h.fakes.onRoot = func(ctx context.Context) error {
		close(creating)
		park(ctx)
		return ctx.Err()
	}
	u := h.sendUpdate()
	h.whenClosed(creating, h.env.CancelWorkflow)
	in := spawnInput()
	in.Request.Parent = subagent.ParentRef{}
	in.Root = &RootSession{Cwd: "/work/repo"}
	h.run(t, in)

	var canceled *temporal.CanceledError
	require.ErrorAs(t, h.env.GetWorkflowError(), &canceled)
	assert.False(t, canceled.HasDetails(), "no child, no outcome")
	_, err := u.get(t)
	assert.EqualError(t, err, "subagent run was cancelled before it was published")
	assert.Equal(t, []string{ActivityCreateRootSession}, h.fakes.Calls())
}

// TestStartAttributesAreNotUpsertedAgain: a root run started as every starter starts it
// (StartAttributes at start: its child, its root's id, depth 1) writes visibility at start
// and close only; a run started without them upserts them first, once.
func TestStartAttributesAreNotUpsertedAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		onStart bool
		want    [][]string
	}{
		{"set by the start options", true, [][]string{
			{"SubagentInputTokens", "SubagentOutputTokens", "SubagentStopReason"},
		}},
		{"started without them", false, [][]string{
			{"SubagentChild", "SubagentDepth", "SubagentLabel", "SubagentParent", "SubagentProvider"},
			{"SubagentInputTokens", "SubagentOutputTokens", "SubagentStopReason"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.fakes.onPublish = func(_ context.Context, in ChildInput) (Published, error) {
				return Published{ChildID: in.ChildID, Depth: 1}, nil // a root's child
			}
			h.sendUpdate()
			in := spawnInput()
			in.Request.Parent = subagent.ParentRef{}
			in.Request.AgentOptions = session.Route{}
			in.Batch = ""
			in.Root = &RootSession{Cwd: "/work/repo"}
			h.bareStart = !tc.onStart
			h.run(t, in)

			require.NoError(t, h.env.GetWorkflowError())
			assert.Equal(t, tc.want, h.Upserts(), "nothing upserted at publication")
		})
	}
}

func TestStatusQueryDuringDrive(t *testing.T) {
	h := newHarness(t)
	driving := make(chan struct{})
	queried := make(chan struct{})
	h.fakes.onDrive = func(context.Context, ChildInput) (DriveSummary, error) {
		close(driving)
		closed(queried)
		return DriveSummary{Steps: 4, StreamedBytes: 99, OutputTokens: 12}, nil
	}
	h.sendUpdate()
	var during Status
	var queryErr error
	h.whenClosed(driving, func() {
		defer close(queried)
		val, err := h.env.QueryWorkflow(QueryStatus)
		if queryErr = err; err == nil {
			queryErr = val.Get(&during)
		}
	})
	h.run(t, spawnInput())

	require.NoError(t, h.env.GetWorkflowError())
	require.NoError(t, queryErr)
	assert.Equal(t, Status{Phase: PhaseDriving, Provider: subagent.ProviderSpawn, Label: "summarise",
		Parent: "parent-1", ChildID: "child-1", Depth: 2}, during)

	val, err := h.env.QueryWorkflow(QueryStatus)
	require.NoError(t, err)
	var after Status
	require.NoError(t, val.Get(&after))
	assert.Equal(t, PhaseCompleted, after.Phase)
	assert.Equal(t, subagent.StopCompleted, after.StopReason)
	assert.Equal(t, &DriveSummary{Steps: 4, StreamedBytes: 99, OutputTokens: 12}, after.Summary)
}

func sdkInput() StartInput {
	in := spawnInput()
	in.Provider = subagent.ProviderSDK
	in.ChildID = "run-1"
	return in
}

func TestSDKSignalCompletesTheUpdate(t *testing.T) {
	h := newHarness(t)
	started := make(chan struct{})
	var u *updateAnswer
	sawAnswer := false
	h.fakes.onSDK = func(_ context.Context, in SDKInput) (Outcome, error) {
		close(started)
		sawAnswer = closed(u.done)
		return Outcome{ChildID: in.RunID, Depth: 1, Result: subagent.Result{
			Output: []session.Block{session.Text("sdk done")}, StopReason: subagent.StopCompleted}}, nil
	}
	u = h.sendUpdate()
	h.whenClosed(started, func() { h.env.SignalWorkflow(SignalSDKPublished, Published{Depth: 1}) })
	in := sdkInput()
	h.run(t, in)

	require.NoError(t, h.env.GetWorkflowError())
	assert.True(t, sawAnswer, "the update answered while the sdk child was running")
	pub, err := u.get(t)
	require.NoError(t, err)
	assert.Equal(t, "run-1", pub.ChildID)
	assert.Equal(t, int64(1), pub.Depth)
	assert.NotEmpty(t, pub.RunID)

	assert.Equal(t, []string{ActivityRunSDKChild}, h.fakes.Calls())
	sdk := h.fakes.sdks[0]
	assert.Equal(t, "run-1", sdk.RunID)
	assert.Equal(t, in.Request, sdk.Request)
	assert.NotEmpty(t, sdk.WorkflowID, "the activity signals its own workflow")

	var out Outcome
	require.NoError(t, h.env.GetWorkflowResult(&out))
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, int64(1), h.Attrs()["SubagentDepth"])
	assert.Equal(t, "run-1", h.Attrs()["SubagentChild"])
}

func TestSDKPublishesAtTheEndWithoutSignal(t *testing.T) {
	h := newHarness(t)
	u := h.sendUpdate()
	h.run(t, sdkInput())

	require.NoError(t, h.env.GetWorkflowError())
	pub, err := u.get(t)
	require.NoError(t, err)
	assert.Equal(t, Published{RunID: pub.RunID, ChildID: "run-1", Depth: 1}, pub)
}

func TestSDKCancelEndsCanceledWithAbortedOutcome(t *testing.T) {
	h := newHarness(t)
	started := make(chan struct{})
	park := blockUntilCancelled(t)
	h.fakes.onSDK = func(ctx context.Context, in SDKInput) (Outcome, error) {
		close(started)
		park(ctx)
		return Outcome{}, temporal.NewCanceledError(Outcome{ChildID: in.RunID, Depth: 1,
			Result: subagent.Result{StopReason: subagent.StopAborted}})
	}
	u := h.sendUpdate()
	h.whenClosed(started, func() { h.env.SignalWorkflow(SignalSDKPublished, Published{Depth: 1}) })
	h.whenClosed(u.done, h.env.CancelWorkflow)
	h.run(t, sdkInput())

	var canceled *temporal.CanceledError
	require.ErrorAs(t, h.env.GetWorkflowError(), &canceled)
	var out Outcome
	require.NoError(t, canceled.Details(&out))
	assert.Equal(t, "run-1", out.ChildID)
	assert.Equal(t, int64(1), out.Depth)
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
	assert.Equal(t, "aborted", h.Attrs()["SubagentStopReason"])
}

// assertRejected checks a rejection as Temporal carries it and as Rejection returns it.
func assertRejected(t *testing.T, err error, rule, msg string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, msg, appErr.Message(), "the contract's message, byte for byte")
	assert.Equal(t, rule, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	ve := Rejection(err)
	require.NotNil(t, ve)
	assert.EqualError(t, ve, msg)
	assert.Equal(t, rule, ve.Rule)
}

func TestSDKRejectionBeforeHandshakeReachesTheCaller(t *testing.T) {
	h := newHarness(t)
	const msg = "subagent-dsh-sdk: no working directory for the child — configure `cwd` or delegate from a parent session that has one"
	h.fakes.onSDK = func(context.Context, SDKInput) (Outcome, error) {
		return Outcome{}, ToApplicationError(&subagent.ValidationError{Rule: subagent.RuleMissingCwd, Message: msg})
	}
	u := h.sendUpdate()
	h.run(t, sdkInput())

	assertRejected(t, h.env.GetWorkflowError(), subagent.RuleMissingCwd, msg)
	_, err := u.get(t)
	assertRejected(t, err, subagent.RuleMissingCwd, msg)
	assert.Equal(t, []string{ActivityRunSDKChild}, h.fakes.Calls())
}

func TestSDKWithoutParentGetsTheRootCwd(t *testing.T) {
	h := newHarness(t)
	in := sdkInput()
	in.Request.Parent = subagent.ParentRef{}
	in.Root = &RootSession{Cwd: "/work/project", Route: session.Route{Provider: "scripted", Model: "s.json"}}
	h.run(t, in)

	require.NoError(t, h.env.GetWorkflowError())
	assert.Equal(t, []string{ActivityRunSDKChild}, h.fakes.Calls(), "the sdk child needs no root session of ours")
	assert.Equal(t, "/work/project", h.fakes.sdks[0].Request.Parent.Cwd)
}
