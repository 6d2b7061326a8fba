package session_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

func event(t *testing.T, typ string, data any) session.Event {
	t.Helper()
	ev, err := session.NewEvent(typ, data)
	require.NoError(t, err)
	return ev
}

func TestUsageSinceCountsOnlyTheChildsOwnMessages(t *testing.T) {
	msg := func(in, out int64) session.Event {
		return event(t, session.TypeAssistantMessage, session.AssistantMessageData{Usage: &session.Usage{InputTokens: in, OutputTokens: out}})
	}
	events := []session.Event{msg(100, 10), event(t, session.TypeEndSeed, struct{}{}), msg(5, 2),
		event(t, session.TypeAssistantMessage, session.AssistantMessageData{}), msg(1, 1)}
	assert.Equal(t, session.Usage{InputTokens: 106, OutputTokens: 13}, session.UsageSince(events, 0))
	assert.Equal(t, session.Usage{InputTokens: 6, OutputTokens: 3}, session.UsageSince(events, 1))
	assert.Equal(t, session.Usage{}, session.UsageSince(events, 9))
	assert.Equal(t, session.UsageSince(events, 0), session.UsageSince(events, -1))
}

func TestPendingStepFindsTheOpenStepAndItsAnsweredCalls(t *testing.T) {
	start := event(t, session.TypeStepStart, session.StepData{Turn: 2, Step: 3})
	answer := event(t, session.TypeToolResult, session.ToolResultData{Turn: 2, Step: 3, CallID: "c1"})
	step, answered, err := session.PendingStep([]session.Event{start, answer})
	require.NoError(t, err)
	assert.Equal(t, session.StepData{Turn: 2, Step: 3}, step)
	assert.Equal(t, map[string]bool{"c1": true}, answered)

	_, _, err = session.PendingStep([]session.Event{start, event(t, session.TypeStepEnd, session.StepData{})})
	assert.EqualError(t, err, "the log does not end inside a step")
	_, _, err = session.PendingStep(nil)
	assert.EqualError(t, err, "the log has no step")
}
