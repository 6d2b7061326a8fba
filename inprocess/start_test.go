package inprocess

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

func TestStartPublishesThenChildCompletes(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "hello from the child", "chunks": 3}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})

	r, err := f.host.Start(context.Background(), request(parent, "say hello"), StartOptions{})
	require.NoError(t, err)

	// Published: the header is stored and the child may be live already.
	hd := f.header(t, r.ID())
	assert.Equal(t, session.OriginSubagent, hd.Origin)
	assert.Equal(t, int64(1), hd.DelegationDepth)
	assert.Equal(t, parent, hd.ParentSession)
	assert.Equal(t, f.cwd, hd.Cwd)
	assert.Zero(t, hd.SeedLength)
	assert.Equal(t, int64(1), r.Depth())

	res := result(t, r)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	assert.Equal(t, []session.Block{session.Text("hello from the child")}, res.Output)
	assert.Nil(t, res.Structured)
	require.NoError(t, r.Dispose(context.Background()))
	assert.Empty(t, f.host.Live())

	// The descriptor sits inside the first step, once, and never reaches the model.
	events := f.events(t, r.ID())
	assert.Equal(t, []string{
		session.TypeApprovalPolicy, session.TypeInboxSpliced, session.TypeTurnStart, session.TypeStepStart,
		session.TypeSubagentDescr, session.TypeAssistantChunk, session.TypeAssistantChunk,
		session.TypeAssistantChunk, session.TypeAssistantMessage, session.TypeStepEnd, session.TypeTurnEnd,
	}, types(events))
	assert.JSONEq(t, `{"version": 2, "mode": "one-shot", "provider": "spawn"}`, string(events[4].Data))
	assert.Equal(t, session.EndReason{Kind: session.EndCompleted}, lastTurnEnd(t, events))
}

func TestStartDepthRules(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "ok"}`)
	max := func(n int64) *int64 { return &n }
	depth := func(n float64) *float64 { return &n }

	cases := []struct {
		name     string
		stored   int64
		runtime  *float64
		maxDepth *int64
		want     int64
		err      string
	}{
		{name: "no cap", want: 1},
		{name: "cap equals child depth", maxDepth: max(1), want: 1},
		{name: "cap 0 forbids", maxDepth: max(0), err: "subagent depth 1 exceeds maxDepth 0"},
		{name: "negative cap", maxDepth: max(-1), err: "subagent maxDepth must be a non-negative safe integer"},
		{name: "stored parent depth at cap", stored: 2, maxDepth: max(2), err: "subagent depth 3 exceeds maxDepth 2"},
		{name: "stored parent depth under cap", stored: 2, maxDepth: max(3), want: 3},
		{name: "runtime deepens", stored: 1, runtime: depth(3), maxDepth: max(3), err: "subagent depth 4 exceeds maxDepth 3"},
		{name: "runtime never lowers", stored: 2, runtime: depth(0), want: 3},
		{name: "bad runtime", runtime: depth(1.5), err: "agent subagentDepth must be a non-negative safe integer"},
		{name: "overflow", stored: session.MaxSafeInteger, err: "subagent child depth exceeds the safe-integer range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := f.parent(t, session.Header{Route: route("child.json"), DelegationDepth: tc.stored})
			before := f.sessions(t)
			req := request(parent, "go")
			req.MaxDepth = tc.maxDepth
			r, err := f.host.Start(context.Background(), req, StartOptions{RuntimeDepth: tc.runtime})
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				assert.Equal(t, before, f.sessions(t))
				assert.Empty(t, f.host.Live())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, r.Depth())
			assert.Equal(t, tc.want, f.header(t, r.ID()).DelegationDepth)
			assert.Equal(t, subagent.StopCompleted, result(t, r).StopReason)
		})
	}
}

func TestDepthErrorCarriesBothNumbers(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{DelegationDepth: 4})
	req := request(parent, "go")
	maxDepth := int64(4)
	req.MaxDepth = &maxDepth
	_, err := f.host.Start(context.Background(), req, StartOptions{})
	var de *subagent.DepthError
	require.True(t, errors.As(err, &de))
	assert.Equal(t, subagent.DepthError{Attempted: 5, Max: 4}, *de)
	var ve *subagent.ValidationError
	require.True(t, errors.As(err, &ve))
	assert.Equal(t, subagent.RuleDepthExceeded, ve.Rule)
}

func TestCancelledBeforeStartCreatesNothing(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	childID := uuid.NewString()
	_, err := f.host.Start(ctx, request(parent, "go"), StartOptions{ChildID: childID})
	require.EqualError(t, err, "subagent request was aborted before child publication")
	require.ErrorIs(t, err, ErrAbortedBeforePublication)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{parent}, f.sessions(t))
	assert.NoDirExists(t, filepath.Join(f.store.Root(), childID))
	assert.Empty(t, f.host.Live())
}

// A deadline already passed reads as the deadline, not as a cancel, with the contract's message.
func TestDeadlineBeforeStartIsDeadlineExceeded(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()

	_, err := f.host.Start(ctx, request(parent, "go"), StartOptions{ChildID: uuid.NewString()})
	require.EqualError(t, err, "subagent request was aborted before child publication")
	require.ErrorIs(t, err, ErrAbortedBeforePublication)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{parent}, f.sessions(t))
}

func TestUnknownToolInFilterFailsStartAndLeavesNothing(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	req.ToolFilter = &subagent.ToolFilter{Allow: []string{"read_file", "launch_rockets"}}

	_, err := f.host.Start(context.Background(), req, StartOptions{})
	require.EqualError(t, err, `tools.restrict() names unknown global tool "launch_rockets"; known global tools: count, grep, list_dir, read_file, write_file`)
	assert.Equal(t, []string{parent}, f.sessions(t))
	assert.Empty(t, f.host.Live())
}

func TestToolFilterRestrictsChild(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "ok"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	req.ToolFilter = &subagent.ToolFilter{Allow: []string{"read_file", "grep"}, Deny: []string{"grep"}}

	r, err := f.host.Start(context.Background(), req, StartOptions{})
	require.NoError(t, err)
	result(t, r)
	reqs := f.recorder.requests(r.ID())
	require.Len(t, reqs, 1)
	assert.Equal(t, []string{"read_file"}, toolNames(reqs[0]))
}

func TestForkSeedsChildWithParentTurns(t *testing.T) {
	f := newFixture(t)
	// One script for both: the fork child continues where the seed's answers end.
	f.script(t, "shared.json", `{"text": "parent answer"}`, `{"text": "child answer"}`)
	parent := f.parent(t, session.Header{Route: route("shared.json")})
	// Run the parent's own first turn for real, so the seed is a real log.
	parentRun := f.runParentTurn(t, parent, "parent question")
	parentEvents := f.events(t, parent)
	require.Len(t, parentEvents, parentRun)

	r, err := f.host.Start(context.Background(), request(parent, "child question"), StartOptions{Provider: subagent.ProviderFork})
	require.NoError(t, err)
	res := result(t, r)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	assert.Equal(t, []session.Block{session.Text("child answer")}, res.Output)

	hd := f.header(t, r.ID())
	require.Equal(t, int64(len(parentEvents)), hd.SeedLength)
	child := f.events(t, r.ID())
	for i, want := range parentEvents {
		assert.Equal(t, want.Type, child[i].Type)
		assert.Equal(t, int64(i), child[i].Seq)
		assert.JSONEq(t, string(want.Data), string(child[i].Data))
	}
	assert.Equal(t, session.TypeEndSeed, child[hd.SeedLength].Type)
	assert.Equal(t, hd.SeedLength, child[hd.SeedLength].Seq)

	descr := child[hd.SeedLength+5] // approval, spliced, turn/start, step/start, descriptor
	require.Equal(t, session.TypeSubagentDescr, descr.Type)
	assert.JSONEq(t, `{"version": 2, "mode": "one-shot", "provider": "fork"}`, string(descr.Data))

	// The model saw the parent's conversation before the child's prompt.
	reqs := f.recorder.requests(r.ID())
	require.Len(t, reqs, 1)
	assert.Contains(t, session.JoinText(reqs[0].Messages[1].Content), "parent question")
}

// runParentTurn runs one real turn of the parent session on a fresh Host's agent and returns
// the parent's log length.
func (f *fixture) runParentTurn(t *testing.T, parent, prompt string) int {
	t.Helper()
	a, err := agent.Open(context.Background(), agent.Options{
		Store: f.store, SessionID: parent, Models: f.models, Tools: f.tools, Preset: agent.DefaultPreset(),
	})
	require.NoError(t, err)
	_, err = a.Followup(context.Background(), []session.Block{session.Text(prompt)})
	require.NoError(t, err)
	require.NoError(t, a.WhenIdle(context.Background()))
	require.NoError(t, a.Close(context.Background()))
	return len(f.events(t, parent))
}

func TestMaxTokensInheritedAndOverridden(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "ok"}`)
	parentRoute := route("child.json")
	parentRoute.MaxTokens = 77
	parent := f.parent(t, session.Header{Route: parentRoute})

	inherit, err := f.host.Start(context.Background(), request(parent, "go"), StartOptions{})
	require.NoError(t, err)
	result(t, inherit)
	req := request(parent, "go")
	req.AgentOptions.MaxTokens = 5
	explicit, err := f.host.Start(context.Background(), req, StartOptions{})
	require.NoError(t, err)
	result(t, explicit)

	assert.Equal(t, int64(77), f.header(t, inherit.ID()).Route.MaxTokens)
	assert.Equal(t, int64(77), f.recorder.requests(inherit.ID())[0].MaxTokens)
	assert.Equal(t, int64(5), f.header(t, explicit.ID()).Route.MaxTokens)
	assert.Equal(t, int64(5), f.recorder.requests(explicit.ID())[0].MaxTokens)
	assert.Equal(t, "child.json", f.header(t, explicit.ID()).Route.Model)
}

func TestChildWithoutRouteEndsError(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{})
	r, err := f.host.Start(context.Background(), request(parent, "go"), StartOptions{})
	require.NoError(t, err)
	res := result(t, r)
	assert.Equal(t, subagent.StopError, res.StopReason)
	assert.Equal(t, []session.Block{}, res.Output)
	// A turn refused before any step gets no descriptor.
	assert.NotContains(t, types(f.events(t, r.ID())), session.TypeSubagentDescr)
}

func TestCancelMidStreamKeepsPartialText(t *testing.T) {
	f := newFixture(t)
	// Ten pieces, one every 200 ms.
	f.script(t, "child.json", `{"text": "0123456789", "chunks": 10, "delayMs": 2000}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	r, err := f.host.Start(ctx, request(parent, "count"), StartOptions{})
	require.NoError(t, err)
	a, ok := f.host.Agent(r.ID())
	require.True(t, ok)
	a.Subscribe(func(ev session.Event) {
		if ev.Type == session.TypeAssistantChunk {
			cancel() // on the first piece, before the next one is due
		}
	})

	res := result(t, r)
	assert.Equal(t, subagent.StopAborted, res.StopReason)
	assert.Equal(t, []session.Block{session.Text("0")}, res.Output)
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent},
		lastTurnEnd(t, f.events(t, r.ID())))
	require.NoError(t, r.Dispose(context.Background()))
	assert.Empty(t, f.host.Live())
}

func TestDisposeHangingRun(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "never", "delayMs": 600000}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})

	r, err := f.host.Start(context.Background(), request(parent, "hang"), StartOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{r.ID()}, f.host.Live())
	require.Eventually(t, func() bool {
		return slices.Contains(types(f.events(t, r.ID())), session.TypeSubagentDescr)
	}, 10*time.Second, 5*time.Millisecond, "the child is waiting for its model")

	require.NoError(t, r.Dispose(context.Background()))
	require.NoError(t, r.Dispose(context.Background()))
	res := result(t, r)
	assert.Equal(t, subagent.StopAborted, res.StopReason)
	assert.Equal(t, []session.Block{}, res.Output)
	assert.Empty(t, f.host.Live())
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent},
		lastTurnEnd(t, f.events(t, r.ID())))
	// The session stays in the store: only the live registry forgets the child.
	assert.Contains(t, f.sessions(t), r.ID())
}

func TestDelegationEventsAtTheirSeq(t *testing.T) {
	f := newFixture(t)
	f.script(t, "shared.json", `{"text": "parent answer"}`, `{"text": "child answer"}`)
	parent := f.parent(t, session.Header{Route: route("shared.json")},
		event(t, session.TypeSandboxMode, session.SandboxModeData{Mode: tools.SandboxReadOnly, Source: "user"}),
		event(t, session.TypeSandboxMode, session.SandboxModeData{Mode: tools.SandboxWorkspaceWrite, Source: SourceDeployment}),
	)
	f.runParentTurn(t, parent, "hi")

	spawn, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: request(parent, "go")})
	require.NoError(t, err)
	fork, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderFork, Request: request(parent, "go")})
	require.NoError(t, err)

	delegated := func(events []session.Event, at int) {
		t.Helper()
		require.Len(t, events, at+2)
		assert.Equal(t, int64(at), events[at].Seq)
		assert.Equal(t, session.TypeSandboxMode, events[at].Type)
		assert.JSONEq(t, `{"mode": "read-only", "source": "delegation"}`, string(events[at].Data))
		assert.Equal(t, session.TypeApprovalPolicy, events[at+1].Type)
		assert.JSONEq(t, `{"policy": "never", "source": "delegation"}`, string(events[at+1].Data))
	}
	delegated(f.events(t, spawn.ChildID), 0)
	n := len(f.events(t, parent))
	forkEvents := f.events(t, fork.ChildID)
	assert.Equal(t, session.TypeEndSeed, forkEvents[n].Type)
	delegated(forkEvents, n+1)

	// A parent whose only sandbox mode is a deployment default delegates none.
	plain := f.parent(t, session.Header{Route: route("shared.json")},
		event(t, session.TypeSandboxMode, session.SandboxModeData{Mode: tools.SandboxReadOnly, Source: SourceDeployment}))
	c, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: request(plain, "go")})
	require.NoError(t, err)
	assert.Equal(t, []string{session.TypeApprovalPolicy}, types(f.events(t, c.ChildID)))
}

func TestReadOnlyChildWriteIsDenied(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json",
		`{"toolCalls": [{"name": "write_file", "input": {"path": "out.txt", "content": "x"}}]}`,
		`{"text": "could not write"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")},
		event(t, session.TypeSandboxMode, session.SandboxModeData{Mode: tools.SandboxReadOnly, Source: "user"}))

	r, err := f.host.Start(context.Background(), request(parent, "write"), StartOptions{})
	require.NoError(t, err)
	res := result(t, r)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)

	results := toolResults(t, f.events(t, r.ID()))
	require.Len(t, results, 1)
	assert.True(t, results[0].IsError)
	assert.Equal(t, `Error: write_file needs approval while the sandbox is read-only; it was rejected automatically because no approver is available (approval policy "never")`,
		session.JoinText(results[0].Content))
	_, statErr := os.Stat(filepath.Join(f.cwd, "out.txt"))
	assert.ErrorIs(t, statErr, os.ErrNotExist)

	// The delegated statement is runtime context, never system prompt.
	req := f.recorder.requests(r.ID())[0]
	assert.NotContains(t, req.System, "delegated subagent")
	require.NotEmpty(t, req.Messages)
	assert.Equal(t, DelegatedContext, session.JoinText(req.Messages[0].Content))
}

func TestPersonaReplacesPresetPersona(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "ok"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	req.Persona = "You are a terse reviewer."
	r, err := f.host.Start(context.Background(), req, StartOptions{})
	require.NoError(t, err)
	result(t, r)
	system := f.recorder.requests(r.ID())[0].System
	assert.True(t, len(system) > 0 && system[:len(req.Persona)] == req.Persona, system)
	assert.NotContains(t, system, "careful software engineering agent")
}

func TestProvidersThroughTheSeam(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "ok"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	var p subagent.Provider = f.host.Spawn()
	assert.Equal(t, "spawn", p.Name())
	assert.Equal(t, "fork", f.host.Fork().Name())
	assert.True(t, f.host.Fork().Capabilities().InheritsParentContext)
	assert.False(t, f.host.Spawn().Capabilities().InheritsParentContext)
	assert.Equal(t, subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true},
		f.host.Spawn().Capabilities())

	run, err := p.Start(context.Background(), request(parent, "go"))
	require.NoError(t, err)
	res, err := run.Result(context.Background())
	require.NoError(t, err)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	require.NoError(t, run.Dispose(context.Background()))
}

func TestCancelRightAfterStartIsNotLost(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "never", "delayMs": 600000}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		r, err := f.host.Start(ctx, request(parent, "go"), StartOptions{})
		require.NoError(t, err)
		cancel() // wherever the run's own listener is by now
		res := result(t, r)
		assert.Equal(t, subagent.Result{Output: []session.Block{}, StopReason: subagent.StopAborted}, res)
		require.NoError(t, r.Dispose(context.Background()))
	}
	assert.Empty(t, f.host.Live())
}
