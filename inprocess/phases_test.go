package inprocess

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// These tests drive the three phases the way Temporal activities do: each on its own Host,
// as if on different workers, meeting only in the store.

func TestCreateTwiceWithTheSameIDIsANoOp(t *testing.T) {
	f := newFixture(t)
	f.script(t, "shared.json", `{"text": "parent answer"}`)
	parent := f.parent(t, session.Header{Route: route("shared.json")})
	f.runParentTurn(t, parent, "hi")
	cr := CreateRequest{Provider: subagent.ProviderFork, ChildID: uuid.NewString(), Request: request(parent, "go")}

	first, err := f.host.Create(context.Background(), cr)
	require.NoError(t, err)
	events := f.events(t, cr.ChildID)
	second, err := f.freshHost(t).Create(context.Background(), cr)
	require.NoError(t, err)
	assert.Equal(t, first, second)
	assert.Equal(t, Created{ChildID: cr.ChildID, Depth: 1, Model: "shared.json"}, first)
	assert.Equal(t, events, f.events(t, cr.ChildID))

	// A retry after a crash that wrote the header but not the setup events completes them.
	torn := cr
	torn.ChildID = uuid.NewString()
	hd := f.header(t, cr.ChildID)
	hd.ID = torn.ChildID
	require.NoError(t, f.store.Create(context.Background(), hd))
	_, err = f.host.Create(context.Background(), torn)
	require.NoError(t, err)
	assert.Equal(t, types(events), types(f.events(t, torn.ChildID)))
}

func TestDriveOnAnotherWorkerResumesACutTurn(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"toolCalls": [{"name": "count", "input": {}}]}`, `{"text": "done"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "count once")
	created, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.NoError(t, err)
	id := created.ChildID

	// What a worker that died after running the tool call left in the store.
	call := session.Block{Type: session.BlockToolCall, ID: "call_0_0", Name: "count", Input: json.RawMessage(`{}`)}
	cut := []session.Event{
		event(t, session.TypeInboxSpliced, session.InboxSplicedData{Target: id, Inserted: []session.UserMessage{
			{ID: uuid.NewString(), Role: "user", Content: req.Prompt, Source: "followup"},
		}}),
		event(t, session.TypeTurnStart, session.TurnStartData{Turn: 1}),
		event(t, session.TypeStepStart, session.StepData{Turn: 1, Step: 1}),
		event(t, session.TypeSubagentDescr, subagent.NewDescriptor(subagent.ProviderSpawn, "")),
		event(t, session.TypeAssistantMessage, session.AssistantMessageData{Turn: 1, Step: 1, Message: session.AssistantMessage{
			ID: uuid.NewString(), Role: "assistant", Content: []session.Block{call}, Source: "scripted/child.json",
		}}),
		event(t, session.TypeToolResult, session.ToolResultData{Turn: 1, Step: 1, CallID: "call_0_0", Name: "count",
			Content: []session.Block{session.Text("1")}}),
	}
	require.NoError(t, f.store.Append(context.Background(), id, session.Renumber(cut, 1)...))

	var last Progress
	p, err := f.freshHost(t).Drive(context.Background(), DriveRequest{
		ChildID: id, Request: req, OnProgress: func(p Progress) { last = p },
	})
	require.NoError(t, err)
	assert.Zero(t, f.counted.Load(), "the stored tool call is not run again")
	assert.Equal(t, PhaseIdle, p.Phase)
	assert.Equal(t, 2, p.Steps, "the stored step and the resumed one")
	assert.Equal(t, int64(len("done")), p.StreamedBytes)
	assert.Equal(t, "done", last.Tail)

	events := f.events(t, id)
	count := func(typ string) int {
		n := 0
		for _, e := range events {
			if e.Type == typ {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 1, count(session.TypeInboxSpliced), "the prompt is not queued twice")
	assert.Equal(t, 1, count(session.TypeSubagentDescr))
	assert.Equal(t, 1, count(session.TypeTurnStart))
	assert.Equal(t, session.EndReason{Kind: session.EndCompleted}, lastTurnEnd(t, events))

	res, err := f.freshHost(t).ReadResult(context.Background(), ReadRequest{ChildID: id, Request: req})
	require.NoError(t, err)
	assert.Equal(t, subagent.Result{Output: []session.Block{session.Text("done")}, StopReason: subagent.StopCompleted}, res)

	// A second drive of a finished child does nothing.
	_, err = f.freshHost(t).Drive(context.Background(), DriveRequest{ChildID: id, Request: req})
	require.NoError(t, err)
	assert.Len(t, f.events(t, id), len(events))
}

func TestReadResultOnAnotherHostMatchesRunResult(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json",
		`{"text": "thinking", "toolCalls": [{"name": "structured_output", "input": {"answer": "yes"}}]}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := structuredRequest(parent, answerSchema)

	r, err := f.host.Start(context.Background(), req, StartOptions{})
	require.NoError(t, err)
	want := result(t, r)
	got, err := f.freshHost(t).ReadResult(context.Background(), ReadRequest{ChildID: r.ID(), Request: req})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.JSONEq(t, `{"answer": "yes"}`, string(got.Structured))
}

func TestDriveCancelledAfterPublicationQueuesNothing(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "too late"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	created, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err = f.freshHost(t).Drive(ctx, DriveRequest{ChildID: created.ChildID, Request: req})
	require.ErrorIs(t, err, context.Canceled)
	res, err := f.freshHost(t).ReadResult(context.Background(), ReadRequest{ChildID: created.ChildID, Request: req, Cancelled: true})
	require.NoError(t, err)
	assert.Equal(t, subagent.Result{Output: []session.Block{}, StopReason: subagent.StopAborted}, res)
	assert.Equal(t, []string{session.TypeApprovalPolicy}, types(f.events(t, created.ChildID)))
}

func TestDriveCancelAbortsTurnWithCauseParent(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"text": "0123456789", "chunks": 10, "delayMs": 2000}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	created, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	h := f.freshHost(t)
	_, err = h.Drive(ctx, DriveRequest{ChildID: created.ChildID, Request: req, OnProgress: func(p Progress) {
		if p.StreamedBytes > 0 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, h.Live())
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent},
		lastTurnEnd(t, f.events(t, created.ChildID)))
	res, err := f.freshHost(t).ReadResult(context.Background(), ReadRequest{ChildID: created.ChildID, Request: req, Cancelled: true})
	require.NoError(t, err)
	assert.Equal(t, subagent.Result{Output: []session.Block{session.Text("0")}, StopReason: subagent.StopAborted}, res)
}

func TestReadResultCancelledEndsATurnItsDriveLeftOpen(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	created, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.NoError(t, err)
	id := created.ChildID
	require.NoError(t, f.store.Append(context.Background(), id, session.Renumber([]session.Event{
		event(t, session.TypeTurnStart, session.TurnStartData{Turn: 1}),
		event(t, session.TypeStepStart, session.StepData{Turn: 1, Step: 1}),
		event(t, session.TypeAssistantChunk, session.AssistantChunkData{Turn: 1, Step: 1,
			Chunk: session.Chunk{Type: session.ChunkTextDelta, Text: "partial"}}),
	}, 1)...))

	res, hd, read, err := f.host.ReadResultLog(context.Background(), ReadRequest{ChildID: id, Request: req, Cancelled: true})
	require.NoError(t, err)
	assert.Equal(t, subagent.Result{Output: []session.Block{session.Text("partial")}, StopReason: subagent.StopAborted}, res)
	events := f.events(t, id)
	assert.Equal(t, session.TypeTurnEnd, events[len(events)-1].Type)
	assert.Equal(t, session.TurnEndData{Turn: 1, Reason: session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent}},
		decode[session.TurnEndData](t, events[len(events)-1]))
	// The log the result was read from is the stored one, the turn end appended: what the
	// ReadResult activity reports the usage and the digest from, without loading it again.
	assert.Equal(t, id, hd.ID)
	assert.Equal(t, types(events), types(read))
}
