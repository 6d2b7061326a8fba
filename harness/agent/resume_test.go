package agent

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

// crashCopy creates session id holding the first n events of from, as a worker killed at that
// point would have left it.
func crashCopy(t *testing.T, f *fixture, from, id string, keep func(events []session.Event) int) []session.Event {
	t.Helper()
	h, events, err := f.store.Load(context.Background(), from)
	require.NoError(t, err)
	h.ID = id
	require.NoError(t, f.store.Create(context.Background(), h))
	cut := events[:keep(events)]
	require.NoError(t, f.store.Append(context.Background(), id, cut...))
	return cut
}

func indexOf(events []session.Event, typ string, nth int) int {
	for i, e := range events {
		if e.Type == typ {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
	return -1
}

func resumeFixture(t *testing.T) *fixture {
	f := newFixture(t)
	require.NoError(t, f.tools.Register(counterTool()))
	f.create("orig", f.script(
		`{"toolCalls": [{"name": "count"}]}`,
		`{"text": "counted", "chunks": 2}`,
		`{"text": "next answer"}`,
	))
	a := f.open("orig", func(o *Options) { o.Preset = Preset{} })
	ask(t, a, "count once")
	require.NoError(t, a.Close(context.Background()))
	require.Equal(t, 1, counter(t, f.cwd))
	return f
}

func TestResumeDoesNotRerunStoredToolCalls(t *testing.T) {
	f := resumeFixture(t)
	cut := crashCopy(t, f, "orig", "crashed", func(ev []session.Event) int {
		return indexOf(ev, session.TypeToolResult, 0) + 1
	})
	f.freshModel() // a new process
	a := f.open("crashed", func(o *Options) { o.Preset = Preset{} })
	require.True(t, a.Pending())
	var sub collector
	defer a.Subscribe(sub.add)()
	require.NoError(t, a.Resume(context.Background()))
	waitIdle(t, a)

	assert.Equal(t, 1, counter(t, f.cwd), "the stored tool call ran once in total")
	events := f.events("crashed")
	assert.Equal(t, []string{
		session.TypeStepEnd,
		session.TypeStepStart, session.TypeAssistantChunk, session.TypeAssistantChunk, session.TypeAssistantMessage, session.TypeStepEnd,
		session.TypeTurnEnd,
	}, types(events[len(cut):]))
	assert.Equal(t, session.StepData{Turn: 1, Step: 1}, decode[session.StepData](t, events[len(cut)]))
	assert.Equal(t, session.StepData{Turn: 1, Step: 2}, decode[session.StepData](t, events[len(cut)+1]))
	assert.Equal(t, session.TurnEndData{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}}, lastTurnEnd(t, events))
	requireSameLog(t, sub.seen(), events, len(cut))
	assert.False(t, a.Pending())
	assert.ErrorIs(t, a.Resume(context.Background()), ErrNotPending)
}

func TestResumeRunsMissingToolCalls(t *testing.T) {
	f := resumeFixture(t)
	cut := crashCopy(t, f, "orig", "crashed", func(ev []session.Event) int {
		return indexOf(ev, session.TypeAssistantMessage, 0) + 1
	})
	f.freshModel()
	a := f.open("crashed", func(o *Options) { o.Preset = Preset{} })
	require.NoError(t, a.Resume(context.Background()))
	waitIdle(t, a)
	assert.Equal(t, 2, counter(t, f.cwd), "the call without a stored result ran")
	events := f.events("crashed")
	assert.Equal(t, session.TypeToolResult, events[len(cut)].Type)
	assert.Equal(t, session.EndCompleted, lastTurnEnd(t, events).Reason.Kind)
}

func TestResumeRedoesTornStep(t *testing.T) {
	f := resumeFixture(t)
	cut := crashCopy(t, f, "orig", "crashed", func(ev []session.Event) int {
		return indexOf(ev, session.TypeAssistantChunk, 0) + 1 // step 2 streamed one chunk, then died
	})
	f.freshModel()
	a := f.open("crashed", func(o *Options) { o.Preset = Preset{} })
	require.True(t, a.Pending())
	require.NoError(t, a.Resume(context.Background()))
	waitIdle(t, a)

	assert.Equal(t, 1, counter(t, f.cwd))
	events := f.events("crashed")
	rest := events[len(cut):]
	assert.Equal(t, []string{
		session.TypeStepStart, session.TypeAssistantChunk, session.TypeAssistantChunk, session.TypeAssistantMessage,
		session.TypeStepEnd, session.TypeTurnEnd,
	}, types(rest))
	assert.Equal(t, session.StepData{Turn: 1, Step: 3}, decode[session.StepData](t, rest[0]), "a torn step is redone as a new step")
	msg := decode[session.AssistantMessageData](t, rest[3])
	assert.Equal(t, "counted", session.JoinText(msg.Message.Content))
}

func TestFollowupOnPendingSessionResumesFirst(t *testing.T) {
	f := resumeFixture(t)
	crashCopy(t, f, "orig", "crashed", func(ev []session.Event) int {
		return indexOf(ev, session.TypeToolResult, 0) + 1
	})
	f.freshModel()
	a := f.open("crashed", func(o *Options) { o.Preset = Preset{} })
	ask(t, a, "and now?")

	events := f.events("crashed")
	first := indexOf(events, session.TypeTurnEnd, 0)
	require.Positive(t, first)
	assert.Equal(t, session.TurnEndData{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}},
		decode[session.TurnEndData](t, events[first]))
	assert.Equal(t, session.TypeInboxSpliced, events[first+1].Type)
	assert.Equal(t, session.TurnEndData{Turn: 2, Reason: session.EndReason{Kind: session.EndCompleted}}, lastTurnEnd(t, events))
	assert.Equal(t, 1, counter(t, f.cwd))
}

func TestResumeUnstartedTurn(t *testing.T) {
	f := resumeFixture(t)
	crashCopy(t, f, "orig", "crashed", func([]session.Event) int { return 1 }) // only the splice
	f.freshModel()
	a := f.open("crashed", func(o *Options) { o.Preset = Preset{} })
	require.True(t, a.Pending())
	require.NoError(t, a.Resume(context.Background()))
	waitIdle(t, a)
	events := f.events("crashed")
	assert.Equal(t, session.TypeTurnStart, events[1].Type)
	assert.Equal(t, session.EndCompleted, lastTurnEnd(t, events).Reason.Kind)
	assert.Equal(t, 2, counter(t, f.cwd))
}
