package subagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

func ev(t testing.TB, typ string, data any) session.Event {
	t.Helper()
	e, err := session.NewEvent(typ, data)
	require.NoError(t, err)
	return e
}

func message(t testing.TB, blocks ...session.Block) session.Event {
	return ev(t, session.TypeAssistantMessage, session.AssistantMessageData{
		Message: session.AssistantMessage{ID: "m", Role: "assistant", Content: blocks},
	})
}

func usageOnly(t testing.TB) session.Event {
	return ev(t, session.TypeAssistantMessage, session.AssistantMessageData{
		Message: session.AssistantMessage{ID: "m", Role: "assistant", Content: []session.Block{}},
		Usage:   &session.Usage{InputTokens: 10, OutputTokens: 0},
	})
}

func delta(t testing.TB, text string) session.Event {
	return ev(t, session.TypeAssistantChunk, session.AssistantChunkData{
		Chunk: session.Chunk{Type: session.ChunkTextDelta, Text: text},
	})
}

func turnEnd(t testing.TB, kind string) session.Event {
	return ev(t, session.TypeTurnEnd, session.TurnEndData{Reason: session.EndReason{Kind: kind}})
}

func TestSelectOutput(t *testing.T) {
	call := session.Block{Type: session.BlockToolCall, ID: "c1", Name: "read_file", Input: json.RawMessage(`{}`)}
	tests := []struct {
		name   string
		events func(t *testing.T) []session.Event
		want   []session.Block
	}{
		{"no events", func(t *testing.T) []session.Event { return nil }, []session.Block{}},
		{"last non-empty message wins", func(t *testing.T) []session.Event {
			return []session.Event{message(t, session.Text("first")), delta(t, "x"), message(t, session.Text("second"))}
		}, []session.Block{session.Text("second")}},
		{"usage-only final message never erases output", func(t *testing.T) []session.Event {
			return []session.Event{message(t, session.Text("answer")), usageOnly(t), turnEnd(t, "completed")}
		}, []session.Block{session.Text("answer")}},
		{"empty text blocks count as empty", func(t *testing.T) []session.Event {
			return []session.Event{message(t, session.Text("answer")), message(t, session.Text(""))}
		}, []session.Block{session.Text("answer")}},
		{"tool calls are content", func(t *testing.T) []session.Event {
			return []session.Event{message(t, session.Text("answer")), message(t, call)}
		}, []session.Block{call}},
		{"streamed deltas without a message", func(t *testing.T) []session.Event {
			return []session.Event{delta(t, "par"), delta(t, ""), delta(t, "tial"), turnEnd(t, "aborted")}
		}, []session.Block{session.Text("partial")}},
		{"message beats deltas", func(t *testing.T) []session.Event {
			return []session.Event{delta(t, "part"), message(t, session.Text("whole")), delta(t, "more")}
		}, []session.Block{session.Text("whole")}},
		{"only empty deltas and a usage-only message", func(t *testing.T) []session.Event {
			return []session.Event{delta(t, ""), usageOnly(t)}
		}, []session.Block{}},
		{"other events are ignored", func(t *testing.T) []session.Event {
			return []session.Event{
				ev(t, session.TypeToolResult, session.ToolResultData{Content: []session.Block{session.Text("tool")}}),
				ev(t, session.TypeSubagentDescr, NewDescriptor("spawn", "")),
			}
		}, []session.Block{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SelectOutput(tt.events(t))
			require.NoError(t, err)
			require.NotNil(t, got)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCollectorKeepsStateOnMalformedEvent(t *testing.T) {
	var c Collector
	require.NoError(t, c.Add(delta(t, "kept")))
	bad := session.Event{Type: session.TypeAssistantMessage, Seq: 7, Data: json.RawMessage(`{"message": {"content": "nope"}}`)}
	err := c.Add(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "assistant/message event seq 7")
	assert.Equal(t, []session.Block{session.Text("kept")}, c.Output())

	_, err = SelectOutput([]session.Event{delta(t, "x"), bad})
	require.Error(t, err)
}

func TestCollectorOutputIsACopy(t *testing.T) {
	var c Collector
	require.NoError(t, c.Add(message(t, session.Text("a"))))
	out := c.Output()
	out[0].Text = "changed"
	assert.Equal(t, "a", c.Output()[0].Text)
}

func TestCollectorLastTurnEnd(t *testing.T) {
	var c Collector
	assert.Nil(t, c.LastTurnEnd())
	require.NoError(t, c.Add(turnEnd(t, session.EndError)))
	require.NoError(t, c.Add(ev(t, session.TypeTurnEnd, session.TurnEndData{
		Turn: 2, Reason: session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent},
	})))
	assert.Equal(t, &session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent}, c.LastTurnEnd())
}

func TestStopReasonTables(t *testing.T) {
	tests := []struct {
		end       *session.EndReason
		inProcess StopReason
		sdk       StopReason
	}{
		{&session.EndReason{Kind: session.EndCompleted}, StopCompleted, StopCompleted},
		{&session.EndReason{Kind: session.EndMaxTokens}, StopMaxTokens, StopMaxTokens},
		{&session.EndReason{Kind: session.EndAborted, Cause: session.CauseUser}, StopAborted, StopAborted},
		{&session.EndReason{Kind: session.EndAborted, Cause: session.CauseDisposed}, StopAborted, StopAborted},
		{&session.EndReason{Kind: session.EndBlocked}, StopRefusal, StopError},
		{&session.EndReason{Kind: session.EndError, Message: "boom"}, StopError, StopError},
		{&session.EndReason{Kind: session.EndInterrupted}, StopError, StopError},
		{&session.EndReason{Kind: "something-new"}, StopError, StopError},
		{nil, StopError, StopError},
	}
	for _, tt := range tests {
		name := "none"
		if tt.end != nil {
			name = tt.end.Kind
		}
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.inProcess, InProcessStopReason(tt.end))
			assert.Equal(t, tt.sdk, SDKStopReason(tt.end))
		})
	}
}
