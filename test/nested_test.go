package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// subagentCall is a scripted response calling the subagent tool once per input.
func subagentCall(t testing.TB, inputs ...map[string]any) string {
	t.Helper()
	type call struct {
		Name  string         `json:"name"`
		Input map[string]any `json:"input"`
	}
	calls := make([]call, len(inputs))
	for i, in := range inputs {
		calls[i] = call{Name: subagenttool.Name, Input: in}
	}
	raw, err := json.Marshal(map[string]any{"toolCalls": calls})
	require.NoError(t, err)
	return string(raw)
}

// TestNestedDelegation: a scripted parent (depth 1) delegates twice through the subagent
// tool; child a (depth 2) delegates once more, to depth 3; child b asks for maxDepth 2 and
// is refused at depth 3 with the exact message. Each nested run is a StartSubagent workflow
// whose SubagentParent is the calling session, and each answer comes back as the caller's
// tool result.
func TestNestedDelegation(t *testing.T) {
	dir := t.TempDir()
	cScript := script(t, dir, `{"text": "c answer"}`)
	aScript := script(t, dir,
		subagentCall(t, map[string]any{"task": "go deeper", "label": "c", "model": cScript}),
		`{"text": "a done"}`)
	bScript := script(t, dir,
		subagentCall(t, map[string]any{"task": "too deep", "label": "never", "model": cScript, "maxDepth": 2}),
		`{"text": "b done"}`)
	parentScript := script(t, dir,
		subagentCall(t,
			map[string]any{"task": "task a", "label": "a", "model": aScript},
			map[string]any{"task": "task b", "label": "b", "model": bScript}),
		`{"text": "parent done"}`)

	pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, parentScript, "delegate twice"))
	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "parent done", session.JoinText(out.Result.Output))
	assert.EqualValues(t, 1, out.Depth)
	record(t, run, "spawn-nested")

	parent := pub.ChildID
	assert.Equal(t, []toolResult{{"a done", false}, {"b done", false}}, toolResults(t, parent),
		"the parent's tool results are its children's answers")

	// The two children of the parent, found the way the Web UI finds them.
	a := nestedOutcome(t, parent, "call_0_0")
	b := nestedOutcome(t, parent, "call_0_1")
	requireListed(t, fmt.Sprintf("SubagentParent = '%s'", parent), []string{
		workflows.WorkflowID(a.ChildID), workflows.WorkflowID(b.ChildID),
	})
	for _, o := range []workflows.Outcome{a, b} {
		assert.EqualValues(t, 2, o.Depth)
		assert.Equal(t, subagent.StopCompleted, o.Result.StopReason)
	}
	assert.Equal(t, "a done", session.JoinText(a.Result.Output))
	assert.Equal(t, "b done", session.JoinText(b.Result.Output))

	// a's child at depth 3.
	c := nestedOutcome(t, a.ChildID, "call_0_0")
	assert.EqualValues(t, 3, c.Depth)
	assert.Equal(t, "c answer", session.JoinText(c.Result.Output))
	assert.Equal(t, []toolResult{{"c answer", false}}, toolResults(t, a.ChildID))
	requireListed(t, fmt.Sprintf("SubagentParent = '%s'", a.ChildID), []string{workflows.WorkflowID(c.ChildID)})

	// b's delegation is refused at the third level: the exact message is its tool result,
	// and the refused run failed with it.
	assert.Equal(t, []toolResult{{"Error: subagent depth 3 exceeds maxDepth 2", true}}, toolResults(t, b.ChildID))
	refusedID := workflows.WorkflowID(activities.NestedChildID(b.ChildID, "call_0_0"))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := env.c.GetWorkflow(ctx, refusedID, "").Get(ctx, nil)
	rejection := workflows.Rejection(err)
	require.NotNil(t, rejection, "the refused run fails with the rejection: %v", err)
	assert.Equal(t, "subagent depth 3 exceeds maxDepth 2", rejection.Message)
	requireListed(t, fmt.Sprintf("SubagentParent = '%s'", b.ChildID), []string{refusedID})
}

// TestNestedCancel: cancelling the outer run cancels the nested run it is waiting for; the
// nested run ends Canceled with its partial output, which is the parent's tool result.
func TestNestedCancel(t *testing.T) {
	dir := t.TempDir()
	slow := slowScript(t, dir)
	parentScript := script(t, dir,
		subagentCall(t, map[string]any{"task": "stream slowly", "model": slow}),
		`{"text": "never reached"}`)
	pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, parentScript, "delegate and wait"))

	nestedID := workflows.WorkflowID(activities.NestedChildID(pub.ChildID, "call_0_0"))
	var nested workflows.Status
	require.Eventually(t, func() bool {
		st, err := subflow.Describe(context.Background(), env.c, nestedID, "")
		nested = st
		return err == nil && st.Progress != nil && st.Progress.Tail != ""
	}, waitLimit, 50*time.Millisecond, "the nested run never streamed")
	assert.Equal(t, pub.ChildID, nested.Parent)
	assert.EqualValues(t, 2, nested.Depth)

	require.NoError(t, env.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	out, cancelled := outcome(t, run)
	require.True(t, cancelled)
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
	record(t, run, "spawn-nested-cancelled")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var nestedOut workflows.Outcome
	err := env.c.GetWorkflow(ctx, nestedID, "").Get(ctx, &nestedOut)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled, "the nested run ends Canceled")
	require.NoError(t, canceled.Details(&nestedOut))
	assert.Equal(t, subagent.StopAborted, nestedOut.Result.StopReason)
	partial := session.JoinText(nestedOut.Result.Output)
	assert.NotEmpty(t, partial)
	assert.True(t, strings.HasPrefix(slowText, partial), "partial output %q is a prefix of the script's text", partial)
	desc, err := env.c.DescribeWorkflowExecution(ctx, nestedID, "")
	require.NoError(t, err)
	assert.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus())

	assert.Equal(t, []toolResult{{
		"subagent run was cancelled\nPartial output before the run ended:\n" + partial, true,
	}}, toolResults(t, pub.ChildID), "the parent's tool result is the nested run's aborted result")
}

// nestedOutcome waits for the outcome of the nested run that tool call callID of session
// sessionID started.
func nestedOutcome(t testing.TB, sessionID, callID string) workflows.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var out workflows.Outcome
	id := workflows.WorkflowID(activities.NestedChildID(sessionID, callID))
	require.NoError(t, env.c.GetWorkflow(ctx, id, "").Get(ctx, &out), "nested run %s", id)
	return out
}

type toolResult struct {
	Text    string
	IsError bool
}

// toolResults returns the subagent tool results stored in a session's log, in order.
func toolResults(t testing.TB, sessionID string) []toolResult {
	t.Helper()
	store, err := filestore.New(env.sessionRoot)
	require.NoError(t, err)
	defer func() { _ = store.Close() }()
	_, events, err := store.Load(context.Background(), sessionID)
	require.NoError(t, err)
	var out []toolResult
	for _, ev := range events {
		var d session.ToolResultData
		if ev.Type != session.TypeToolResult || ev.Decode(&d) != nil || d.Name != subagenttool.Name {
			continue
		}
		out = append(out, toolResult{session.JoinText(d.Content), d.IsError})
	}
	return out
}
