package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
)

func TestPlainAnswer(t *testing.T) {
	f := newFixture(t)
	f.create("s1", f.script(`{"text": "Hello there, world", "chunks": 3}`))
	a := f.open("s1")
	var sub collector
	defer a.Subscribe(sub.add)()

	msgID := ask(t, a, "hi")

	events := f.events("s1")
	require.Equal(t, []string{
		session.TypeInboxSpliced, session.TypeTurnStart, session.TypeStepStart,
		session.TypeAssistantChunk, session.TypeAssistantChunk, session.TypeAssistantChunk,
		session.TypeAssistantMessage, session.TypeStepEnd, session.TypeTurnEnd,
	}, types(events))
	for i, e := range events {
		require.Equal(t, int64(i), e.Seq)
	}

	spliced := decode[session.InboxSplicedData](t, events[0])
	assert.Equal(t, "s1", spliced.Target)
	assert.Equal(t, int64(0), spliced.Start)
	require.Len(t, spliced.Inserted, 1)
	assert.Equal(t, session.UserMessage{
		ID: msgID, Role: "user", Content: []session.Block{session.Text("hi")}, Source: "followup",
	}, spliced.Inserted[0])
	assert.Equal(t, session.TurnStartData{Turn: 1}, decode[session.TurnStartData](t, events[1]))
	assert.Equal(t, session.StepData{Turn: 1, Step: 1}, decode[session.StepData](t, events[2]))

	var text string
	for i, e := range events[3:6] {
		c := decode[session.AssistantChunkData](t, e)
		assert.Equal(t, 1, c.Turn)
		assert.Equal(t, 1, c.Step)
		assert.Equal(t, session.ChunkTextDelta, c.Chunk.Type)
		assert.Equal(t, i, c.Chunk.Index)
		text += c.Chunk.Text
	}
	assert.Equal(t, "Hello there, world", text)

	msg := decode[session.AssistantMessageData](t, events[6])
	assert.Equal(t, "assistant", msg.Message.Role)
	assert.Equal(t, []session.Block{session.Text("Hello there, world")}, msg.Message.Content)
	assert.Equal(t, "scripted/script.json", msg.Message.Source)
	assert.NotEmpty(t, msg.Message.ID)
	require.NotNil(t, msg.Usage)

	assert.Equal(t, session.TurnEndData{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}},
		decode[session.TurnEndData](t, events[8]))
	requireSameLog(t, sub.seen(), events, 0)

	// A second turn continues the numbering and the history.
	f.script(`{"text": "one"}`, `{"text": "two"}`) // the session's second request takes "two"
	ask(t, a, "again")
	events = f.events("s1")
	spliced = decode[session.InboxSplicedData](t, events[9])
	assert.Equal(t, int64(2), spliced.Start, "history: user, assistant before the second message")
	assert.Equal(t, 2, decode[session.TurnStartData](t, events[10]).Turn)
	requireSameLog(t, sub.seen(), events, 0)
}

func TestToolRoundTrip(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.cwd, "notes.txt"), []byte("alpha beta\n"), 0o644))
	f.create("s1", f.script(
		`{"text": "Let me look.", "toolCalls": [{"name": "read_file", "input": {"path": "notes.txt"}}]}`,
		`{"text": "It says alpha beta."}`,
	))
	a := f.open("s1")
	ask(t, a, "what is in notes.txt?")

	events := f.events("s1")
	require.Equal(t, []string{
		session.TypeInboxSpliced, session.TypeTurnStart,
		session.TypeStepStart, session.TypeAssistantChunk, session.TypeAssistantMessage, session.TypeToolResult, session.TypeStepEnd,
		session.TypeStepStart, session.TypeAssistantChunk, session.TypeAssistantMessage, session.TypeStepEnd,
		session.TypeTurnEnd,
	}, types(events))

	msg := decode[session.AssistantMessageData](t, events[4])
	require.Len(t, msg.Message.Content, 2)
	assert.Equal(t, session.Text("Let me look."), msg.Message.Content[0])
	call := msg.Message.Content[1]
	assert.Equal(t, session.BlockToolCall, call.Type)
	assert.Equal(t, "read_file", call.Name)
	assert.JSONEq(t, `{"path": "notes.txt"}`, string(call.Input))

	res := decode[session.ToolResultData](t, events[5])
	assert.Equal(t, 1, res.Step)
	assert.Equal(t, call.ID, res.CallID)
	assert.Equal(t, "read_file", res.Name)
	assert.False(t, res.IsError)
	assert.Contains(t, session.JoinText(res.Content), "alpha beta")
	assert.Equal(t, session.StepData{Turn: 1, Step: 2}, decode[session.StepData](t, events[7]))
	assert.Equal(t, session.EndCompleted, lastTurnEnd(t, events).Reason.Kind)

	// The second request carries the call and its result, and the scope's tools.
	reqs := f.recorder.requests()
	require.Len(t, reqs, 2)
	second := reqs[1].Messages
	require.Len(t, second, 3)
	assert.Equal(t, model.RoleAssistant, second[1].Role)
	assert.Equal(t, model.RoleTool, second[2].Role)
	assert.Equal(t, call.ID, second[2].ToolCallID)
	var names []string
	for _, ts := range reqs[0].Tools {
		names = append(names, ts.Name)
	}
	assert.Equal(t, tools.DefaultToolNames, names)
	assert.Equal(t, "s1", reqs[0].SessionID)
	assert.Equal(t, f.cwd, reqs[0].Cwd)
}

func TestTurnEnds(t *testing.T) {
	cases := []struct {
		name     string
		response string
		want     session.EndReason
		wantMsg  bool
	}{
		{"max tokens", `{"text": "cut sh", "finish": "length"}`, session.EndReason{Kind: session.EndMaxTokens}, true},
		{"model error", `{"error": "upstream exploded"}`, session.EndReason{Kind: session.EndError, Message: "upstream exploded"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.create("s1", f.script(tc.response))
			a := f.open("s1")
			ask(t, a, "go")
			events := f.events("s1")
			assert.Equal(t, tc.want, lastTurnEnd(t, events).Reason)
			assert.Equal(t, tc.wantMsg, contains(types(events), session.TypeAssistantMessage))
		})
	}

	t.Run("script exhausted", func(t *testing.T) {
		f := newFixture(t)
		f.create("s1", f.script())
		a := f.open("s1")
		ask(t, a, "go")
		assert.Equal(t, session.EndReason{Kind: session.EndError, Message: "script exhausted"},
			lastTurnEnd(t, f.events("s1")).Reason)
	})

	t.Run("no route", func(t *testing.T) {
		f := newFixture(t)
		f.create("s1", "")
		a := f.open("s1")
		ask(t, a, "go")
		events := f.events("s1")
		assert.Equal(t, []string{session.TypeInboxSpliced, session.TypeTurnStart, session.TypeTurnEnd}, types(events))
		assert.Equal(t, session.EndReason{Kind: session.EndError, Message: NoRouteMessage}, lastTurnEnd(t, events).Reason)
	})

	t.Run("step limit", func(t *testing.T) {
		f := newFixture(t)
		call := `{"toolCalls": [{"name": "list_dir", "input": {}}]}`
		f.create("s1", f.script(call, call, call, `{"text": "never"}`))
		a := f.open("s1", func(o *Options) { o.StepLimit = 2 })
		ask(t, a, "go")
		events := f.events("s1")
		end := lastTurnEnd(t, events)
		assert.Equal(t, session.EndError, end.Reason.Kind)
		assert.Contains(t, end.Reason.Message, "step limit of 2 steps")
		assert.Len(t, f.recorder.requests(), 2)
		assert.Equal(t, session.TypeStepEnd, events[len(events)-2].Type)
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCancelMidStream(t *testing.T) {
	f := newFixture(t)
	f.create("s1", f.script(`{"text": "abcdefghij", "chunks": 10, "delayMs": 5000}`))
	a := f.open("s1")
	sub := collector{onEv: func(e session.Event) {
		if e.Type == session.TypeAssistantChunk {
			a.Cancel(session.CauseParent)
		}
	}}
	defer a.Subscribe(sub.add)()
	ask(t, a, "go")

	events := f.events("s1")
	assert.False(t, contains(types(events), session.TypeAssistantMessage), "no message for an aborted partial")
	assert.Equal(t, session.TypeAssistantChunk, events[3].Type)
	assert.Equal(t, "a", decode[session.AssistantChunkData](t, events[3]).Chunk.Text)
	assert.Equal(t, session.TurnEndData{Turn: 1, Reason: session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent}},
		lastTurnEnd(t, events))
	requireSameLog(t, sub.seen(), events, 0)
	assert.False(t, a.Pending())
}

func TestCancelDuringTool(t *testing.T) {
	f := newFixture(t)
	started := make(chan struct{})
	require.NoError(t, f.tools.Register(tools.Tool{
		Name: "block", Parameters: json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, _ tools.Env, _ tools.Call) (tools.Result, error) {
			close(started)
			<-ctx.Done()
			return tools.Result{}, ctx.Err()
		},
	}))
	f.create("s1", f.script(
		`{"toolCalls": [{"name": "block"}, {"name": "list_dir"}]}`,
		`{"text": "second turn"}`,
	))
	a := f.open("s1", func(o *Options) { o.Preset = Preset{} })
	_, err := a.Followup(context.Background(), []session.Block{session.Text("go")})
	require.NoError(t, err)
	<-started
	a.Cancel(session.CauseUser)
	waitIdle(t, a)

	events := f.events("s1")
	res := decode[session.ToolResultData](t, events[4])
	assert.Equal(t, "block", res.Name)
	assert.True(t, res.IsError, "the running call saw its context cancelled")
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseUser}, lastTurnEnd(t, events).Reason)
	assert.Equal(t, session.TypeTurnEnd, events[5].Type, "list_dir never ran")

	// The next turn's request answers the call that never ran, so the conversation stays valid.
	ask(t, a, "again")
	reqs := f.recorder.requests()
	msgs := reqs[len(reqs)-1].Messages
	require.Len(t, msgs, 5)
	assert.Equal(t, model.RoleTool, msgs[3].Role)
	assert.True(t, msgs[3].IsError)
	assert.Equal(t, notExecutedText, session.JoinText(msgs[3].Content))
	assert.Equal(t, model.RoleUser, msgs[4].Role)
	assert.Equal(t, session.EndCompleted, lastTurnEnd(t, f.events("s1")).Reason.Kind)
}

// TestCancelRightAfterFollowupIsNotLost: a cancel that comes before the followed-up turn has
// started, or while it runs, aborts it. The answer takes long enough that the turn cannot
// have ended first: an immediate one let a loaded machine finish the turn before the cancel
// (seen once under -race), a case where there is nothing left to cancel.
func TestCancelRightAfterFollowupIsNotLost(t *testing.T) {
	f := newFixture(t)
	f.create("s1", f.script(`{"text": "never said", "delayMs": 10000}`))
	a := f.open("s1")
	a.Cancel(session.CauseUser) // idle: no-op
	_, err := a.Followup(context.Background(), []session.Block{session.Text("go")})
	require.NoError(t, err)
	a.Cancel(session.CauseParent)
	waitIdle(t, a)
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent},
		lastTurnEnd(t, f.events("s1")).Reason)
}

func TestCloseAbortsRunningTurn(t *testing.T) {
	f := newFixture(t)
	f.create("s1", f.script(`{"text": "slow", "delayMs": 10000}`))
	a := f.open("s1")
	started := make(chan struct{})
	var once bool
	defer a.Subscribe(func(e session.Event) {
		if e.Type == session.TypeStepStart && !once {
			once = true
			close(started)
		}
	})()
	_, err := a.Followup(context.Background(), []session.Block{session.Text("go")})
	require.NoError(t, err)
	<-started
	require.NoError(t, a.Close(context.Background()))
	require.NoError(t, a.Close(context.Background()), "idempotent")
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseDisposed},
		lastTurnEnd(t, f.events("s1")).Reason)
	_, err = a.Followup(context.Background(), []session.Block{session.Text("late")})
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, a.WhenIdle(context.Background()))
}

func TestPromptAndRuntimeContext(t *testing.T) {
	f := newFixture(t)
	f.create("s1", f.script(`{"text": "ok"}`))
	a := f.open("s1")
	a.SetPersona("You are a terse reviewer.")
	a.AddSection(Section{Name: "tool:structured_output", Order: 190, Text: "Report with the tool."})
	a.AddSection(Section{Name: "early", Order: 50, Text: "Early rules."})
	a.AddContext(Statement{Order: 120, Text: "You are a delegated subagent."})
	a.AddContext(Statement{Order: 10, Text: "Today is a test."})
	ask(t, a, "hi")

	req := f.recorder.requests()[0]
	sections := strings.Split(req.System, "\n\n")
	require.Len(t, sections, 4)
	assert.Equal(t, "You are a terse reviewer.", sections[0], "persona replaced at order 0")
	assert.Equal(t, "Early rules.", sections[1])
	assert.Equal(t, DefaultPreset().Sections[1].Text, sections[2])
	assert.Equal(t, "Report with the tool.", sections[3])
	assert.NotContains(t, req.System, "delegated subagent")

	require.Len(t, req.Messages, 2)
	assert.Equal(t, model.RoleUser, req.Messages[0].Role)
	assert.Equal(t, "Today is a test.\n\nYou are a delegated subagent.", session.JoinText(req.Messages[0].Content))
	assert.Equal(t, "hi", session.JoinText(req.Messages[1].Content))

	// The runtime context is not part of the logged conversation.
	spliced := decode[session.InboxSplicedData](t, f.events("s1")[0])
	assert.Equal(t, int64(0), spliced.Start)
}

func TestSandboxAndApprovalReachTools(t *testing.T) {
	f := newFixture(t)
	var envs []tools.Env
	require.NoError(t, f.tools.Register(tools.Tool{
		Name: "env", Parameters: json.RawMessage(`{"type":"object"}`),
		Handler: func(_ context.Context, env tools.Env, _ tools.Call) (tools.Result, error) {
			envs = append(envs, env)
			return tools.TextResult("ok"), nil
		},
	}))
	call := `{"toolCalls": [{"name": "env"}]}`
	f.create("s1", f.script(call, `{"text": "a"}`, call, `{"text": "b"}`, call, `{"text": "c"}`))
	ctx := context.Background()
	a := f.open("s1", func(o *Options) { o.Preset = Preset{} })
	_, err := a.Append(ctx, session.TypeSandboxMode, session.SandboxModeData{Mode: tools.SandboxReadOnly, Source: "delegation"})
	require.NoError(t, err)
	_, err = a.Append(ctx, session.TypeApprovalPolicy, session.ApprovalPolicyData{Policy: tools.ApprovalNever, Source: "delegation"})
	require.NoError(t, err)
	ask(t, a, "one")
	_, err = a.Append(ctx, session.TypeSandboxMode, session.SandboxModeData{Mode: tools.SandboxWorkspaceWrite, Source: "user"})
	require.NoError(t, err)
	ask(t, a, "two")
	_, err = a.Append(ctx, session.TypeSandboxMode, session.SandboxModeData{Mode: "Read-Only", Source: "user"})
	require.EqualError(t, err, `agent: append sandbox/mode to s1: unknown sandbox mode "Read-Only"; known modes: read-only, workspace-write`)
	require.NoError(t, a.Close(ctx))

	// A reopened agent reads the latest policy from the log.
	b := f.open("s1", func(o *Options) { o.Preset = Preset{} })
	ask(t, b, "three")

	require.Len(t, envs, 3)
	assert.Equal(t, tools.Env{SessionID: "s1", Cwd: f.cwd, SandboxMode: "read-only", ApprovalPolicy: "never"}, envs[0])
	assert.Equal(t, "workspace-write", envs[1].SandboxMode, "a later switch wins")
	assert.Equal(t, "workspace-write", envs[2].SandboxMode)
	assert.Equal(t, "never", envs[2].ApprovalPolicy)
}

func TestStepHooksAndConclude(t *testing.T) {
	f := newFixture(t)
	f.create("s1", f.script(
		`{"toolCalls": [{"name": "commit"}]}`,
		`{"text": "must not be requested"}`,
	))
	a := f.open("s1", func(o *Options) { o.Preset = Preset{} })
	_, err := a.Scope().Register(tools.Tool{
		Name: "commit", Parameters: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, tools.Env, tools.Call) (tools.Result, error) {
			a.ConcludeAfterStep()
			return tools.TextResult("recorded"), nil
		},
	})
	require.NoError(t, err)
	a.OnStepStart(func(turn, step int) []session.Event {
		if turn != 1 || step != 1 {
			return nil
		}
		ev, err := session.NewEvent(session.TypeSubagentDescr, map[string]any{"version": 2, "mode": "one-shot", "provider": "spawn"})
		require.NoError(t, err)
		return []session.Event{ev}
	})
	ask(t, a, "go")

	events := f.events("s1")
	assert.Equal(t, []string{
		session.TypeInboxSpliced, session.TypeTurnStart, session.TypeStepStart, session.TypeSubagentDescr,
		session.TypeAssistantMessage, session.TypeToolResult, session.TypeStepEnd, session.TypeTurnEnd,
	}, types(events))
	assert.Equal(t, session.EndCompleted, lastTurnEnd(t, events).Reason.Kind)
	assert.Len(t, f.recorder.requests(), 1, "no model request after the concluding step")
}

func TestOpenRejectsUnknownPresetTool(t *testing.T) {
	f := newFixture(t)
	f.create("s1", "")
	_, err := Open(context.Background(), Options{
		Store: f.store, SessionID: "s1", Models: f.models, Tools: f.tools,
		Preset: Preset{Name: "odd", Tools: []string{"read_file", "shell"}},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `tools.restrict() names unknown global tool "shell"`)

	_, err = Open(context.Background(), Options{Store: f.store, SessionID: "absent", Models: f.models, Tools: f.tools})
	assert.ErrorIs(t, err, session.ErrNotFound)
}

// TestTokenBudget: a turn whose usage reaches the route's token budget ends max-tokens after
// the step that crossed it (its tool calls ran, each with a result); the next script
// response is never asked for. Without the budget the same script runs to its answer.
func TestTokenBudget(t *testing.T) {
	call := `{"toolCalls": [{"name": "list_dir", "input": {}}]}`
	for _, tc := range []struct {
		budget int64
		want   string
	}{{budget: 1, want: session.EndMaxTokens}, {budget: 0, want: session.EndCompleted}} {
		f := newFixture(t)
		h := session.Header{ID: "s1", Cwd: f.cwd, Route: &session.Route{
			Provider: model.ProviderScripted, Model: f.script(call, `{"text": "done"}`), TokenBudget: tc.budget}}
		require.NoError(t, f.store.Create(context.Background(), h))
		a := f.open("s1")
		ask(t, a, "go")
		events := f.events("s1")
		assert.Equal(t, tc.want, lastTurnEnd(t, events).Reason.Kind, "budget %d", tc.budget)
		n := 0
		for _, ev := range events {
			if ev.Type == session.TypeAssistantMessage {
				n++
			}
		}
		if tc.budget > 0 {
			assert.Equal(t, 1, n, "the turn stops after the step that crossed the budget")
			assert.Contains(t, types(events), session.TypeToolResult, "the crossing step's call has its result")
		} else {
			assert.Equal(t, 2, n)
		}
	}
}
