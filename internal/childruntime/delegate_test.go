package childruntime

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/internal/wire"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
)

// TestSubagentToolDelegatesToTheClient: a session's subagent calls become subagent/run
// requests to the client, announced by subagent.started and closed by subagent.finished with
// the stop reason (contract R-64); the client's answers are the tool results, an error answer
// with its exact message.
func TestSubagentToolDelegatesToTheClient(t *testing.T) {
	r := startRuntime(t)
	var mu sync.Mutex
	var asked []wire.SubagentRunParams
	r.conn.Handle(wire.MethodSubagentRun, func(_ context.Context, raw json.RawMessage) (any, error) {
		var p wire.SubagentRunParams
		require.NoError(t, json.Unmarshal(raw, &p))
		mu.Lock()
		asked = append(asked, p)
		mu.Unlock()
		if p.Request.MaxDepth != nil && *p.Request.MaxDepth == 1 {
			return nil, &wire.Error{Code: wire.CodeInternalError, Message: "subagent depth 2 exceeds maxDepth 1"}
		}
		return wire.SubagentRunResult{Result: subagent.Result{
			Output: []session.Block{session.Text("nested answer")}, StopReason: subagent.StopCompleted,
		}}, nil
	})
	r.initialize(r.script(
		`{"toolCalls": [
			{"name": "subagent", "input": {"task": "first", "provider": "spawn"}},
			{"name": "subagent", "input": {"task": "second", "maxDepth": 1}}]}`,
		`{"text": "done"}`))
	r.prompt("s1", "delegate")
	evs := events(r.notes.waitIdle(t, "s1"))

	var results []string
	for _, ev := range evs {
		var d session.ToolResultData
		if ev.Type == session.TypeToolResult && ev.Decode(&d) == nil {
			results = append(results, session.JoinText(d.Content))
		}
	}
	assert.Equal(t, []string{"nested answer", "Error: subagent depth 2 exceeds maxDepth 1"}, results)
	assert.Equal(t, session.EndCompleted, lastTurnEnd(t, evs).Reason.Kind)

	require.Len(t, asked, 2)
	assert.Equal(t, "s1", asked[0].ParentSessionID)
	assert.Equal(t, "call_0_0", asked[0].CallID)
	assert.Equal(t, "spawn", asked[0].Provider)
	assert.Equal(t, "s1", asked[0].Request.Parent.SessionID)
	require.NotNil(t, asked[0].Request.MaxDepth)
	assert.EqualValues(t, subagent.DefaultMaxDepth, *asked[0].Request.MaxDepth)

	var started []wire.SubagentStartedParams
	var finished []wire.SubagentFinishedParams
	for _, n := range r.notes.snapshot() {
		switch n.Method {
		case wire.NotifySubagentStarted:
			var p wire.SubagentStartedParams
			require.NoError(t, json.Unmarshal(n.Params, &p))
			started = append(started, p)
		case wire.NotifySubagentFinished:
			var p wire.SubagentFinishedParams
			require.NoError(t, json.Unmarshal(n.Params, &p))
			finished = append(finished, p)
		}
	}
	first, second := subagenttool.NestedChildID("s1", "call_0_0"), subagenttool.NestedChildID("s1", "call_0_1")
	assert.Equal(t, []wire.SubagentStartedParams{{ParentSessionID: "s1", ChildSessionID: first}, {ParentSessionID: "s1", ChildSessionID: second}}, started)
	assert.Equal(t, []wire.SubagentFinishedParams{
		{ParentSessionID: "s1", ChildSessionID: first, StopReason: "completed"},
		{ParentSessionID: "s1", ChildSessionID: second, StopReason: "error"},
	}, finished)
}
