package inprocess

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// sequence is a model answering each request with the next of its responses, whatever the
// session: responses with tool call ids chosen by the test.
type sequence struct {
	mu        sync.Mutex
	responses []model.Response
}

func (s *sequence) Stream(ctx context.Context, _ model.Request, _ func(string)) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.responses) == 0 {
		return model.Response{}, model.ErrScriptExhausted
	}
	r := s.responses[0]
	s.responses = s.responses[1:]
	return r, nil
}

// TestStructuredDuplicateCallIDsKeepTheCommittedValue: a response repeating a call id must not
// let the later call's input replace the value the first, successful call committed.
func TestStructuredDuplicateCallIDsKeepTheCommittedValue(t *testing.T) {
	f := newFixture(t)
	m := &sequence{responses: []model.Response{{
		Finish: model.FinishToolCalls,
		ToolCalls: []model.ToolCall{
			{ID: "dup", Name: StructuredToolName, Input: json.RawMessage(`{"answer":"first"}`)},
			{ID: "dup", Name: StructuredToolName, Input: json.RawMessage(`{"answer":"second"}`)},
		},
	}}}
	host := f.hostWith(t, m)
	parent := f.parent(t, session.Header{Route: route("any")})
	req := structuredRequest(parent, answerSchema)

	r, err := host.Start(context.Background(), req, StartOptions{})
	require.NoError(t, err)
	res := result(t, r)
	assert.Equal(t, subagent.StopCompleted, res.StopReason)
	assert.JSONEq(t, `{"answer":"first"}`, string(res.Structured))

	// The same from the log alone, on another worker.
	read, err := f.freshHost(t).ReadResult(context.Background(), ReadRequest{ChildID: r.ID(), Request: req})
	require.NoError(t, err)
	assert.JSONEq(t, `{"answer":"first"}`, string(read.Structured))
	results := toolResults(t, f.events(t, r.ID()))
	require.Len(t, results, 2)
	assert.False(t, results[0].IsError)
	assert.True(t, results[1].IsError, "the repeated id is denied after the capture")
}

// TestResumeRunsARepeatedCallIDThatDidNotRun: results are matched to executions, so the second
// call with a repeated id still runs after a crash that stored only the first one's result.
func TestResumeRunsARepeatedCallIDThatDidNotRun(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"toolCalls": [{"name": "count", "input": {}}]}`, `{"text": "done"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "count twice")
	created, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.NoError(t, err)
	id := created.ChildID
	call := session.Block{Type: session.BlockToolCall, ID: "dup", Name: "count", Input: json.RawMessage(`{}`)}
	cut := []session.Event{
		event(t, session.TypeInboxSpliced, session.InboxSplicedData{Target: id, Inserted: []session.UserMessage{
			{ID: uuid.NewString(), Role: "user", Content: req.Prompt, Source: "followup"},
		}}),
		event(t, session.TypeTurnStart, session.TurnStartData{Turn: 1}),
		event(t, session.TypeStepStart, session.StepData{Turn: 1, Step: 1}),
		event(t, session.TypeSubagentDescr, subagent.NewDescriptor(subagent.ProviderSpawn, "")),
		event(t, session.TypeAssistantMessage, session.AssistantMessageData{Turn: 1, Step: 1, Message: session.AssistantMessage{
			ID: uuid.NewString(), Role: "assistant", Content: []session.Block{call, call}, Source: "scripted/child.json",
		}}),
		event(t, session.TypeToolResult, session.ToolResultData{Turn: 1, Step: 1, CallID: "dup", Name: "count",
			Content: []session.Block{session.Text("1")}}),
	}
	require.NoError(t, f.store.Append(context.Background(), id, session.Renumber(cut, 1)...))

	_, err = f.freshHost(t).Drive(context.Background(), DriveRequest{ChildID: id, Request: req})
	require.NoError(t, err)
	assert.Equal(t, int64(1), f.counted.Load(), "only the call without a stored result ran")
	assert.Len(t, toolResults(t, f.events(t, id)), 2)
}
