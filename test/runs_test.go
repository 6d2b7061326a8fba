package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestProvidersComplete runs one delegation per provider through the workflow to a completed
// result: spawn in a new root session, fork from the spawn child (so it is seeded with the
// spawn child's completed turn and its script continues after it) and an sdk child process.
func TestProvidersComplete(t *testing.T) {
	dir := t.TempDir()
	path := script(t, dir,
		`{"toolCalls": [{"name": "list_dir", "input": {}}]}`,
		`{"text": "spawn answer", "chunks": 3}`,
		`{"text": "fork answer"}`)

	pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, path, "look around"))
	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "spawn answer", session.JoinText(out.Result.Output))
	assert.Equal(t, pub.ChildID, out.ChildID)
	assert.EqualValues(t, 1, out.Depth, "the child of a root session has depth 1")
	record(t, run, "spawn-completed")

	t.Run("fork", func(t *testing.T) {
		in := workflows.StartInput{
			Provider: subagent.ProviderFork,
			Request: subagent.Request{
				Prompt: []session.Block{session.Text("and then?")},
				Parent: subagent.ParentRef{SessionID: pub.ChildID},
			},
		}
		forkPub, forkRun := start(t, in)
		out, cancelled := outcome(t, forkRun)
		require.False(t, cancelled)
		assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
		// The seed's two assistant messages consumed two responses: the fork answers with
		// the third.
		assert.Equal(t, "fork answer", session.JoinText(out.Result.Output))
		assert.EqualValues(t, 2, forkPub.Depth)
		record(t, forkRun, "fork-completed")
	})

	t.Run("sdk", func(t *testing.T) {
		sdkScript := script(t, dir, `{"text": "sdk answer", "chunks": 2}`)
		sdkPub, sdkRun := start(t, rootInput(subagent.ProviderSDK, dir, sdkScript, "answer from a process"))
		out, cancelled := outcome(t, sdkRun)
		require.False(t, cancelled)
		assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
		assert.Equal(t, "sdk answer", session.JoinText(out.Result.Output))
		assert.Equal(t, sdkPub.ChildID, out.ChildID)
		record(t, sdkRun, "sdk-completed")
	})
}

// TestStructuredOutput delivers the value of the child's structured_output call in the
// workflow's result.
func TestStructuredOutput(t *testing.T) {
	dir := t.TempDir()
	path := script(t, dir, `{"toolCalls": [{"name": "structured_output", "input": {"answer": 42, "why": "scripted"}}]}`)
	in := rootInput(subagent.ProviderSpawn, dir, path, "report structured")
	in.Request.OutputSchema = json.RawMessage(`{"type": "object", "properties": {"answer": {"type": "integer"}, "why": {"type": "string"}}, "required": ["answer"]}`)

	_, run := start(t, in)
	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.JSONEq(t, `{"answer": 42, "why": "scripted"}`, string(out.Result.Structured))
}

// TestRejectedOverMaxDepth: a run whose child would be deeper than maxDepth is rejected
// through Update-with-Start with the exact contract message, and its workflow fails with it.
func TestRejectedOverMaxDepth(t *testing.T) {
	dir := t.TempDir()
	in := rootInput(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "never"}`), "too deep")
	zero := int64(0)
	in.Request.MaxDepth = &zero
	id := "e2e-too-deep-" + t.Name()

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, _, err := subflow.Start(ctx, env.c, subflow.StartOptions{WorkflowID: id, TaskQueue: env.taskQueue, Input: in})
	var ve *subagent.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "subagent depth 1 exceeds maxDepth 0", ve.Error())
	assert.Equal(t, subagent.RuleDepthExceeded, ve.Rule)
	_, err = env.c.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, "Start removed the run its worker rejected: nothing left Failed")

	// Started by type name, as a caller of the JSON contract does, the run fails with the
	// rejection and stays, as the contract says.
	id += "-by-name"
	run, err := env.c.ExecuteWorkflow(ctx, subflow.StartWorkflowOptions(id, env.taskQueue, in), workflows.WorkflowName, in)
	require.NoError(t, err)
	err = run.Get(ctx, nil)
	require.Error(t, err)
	rejection := workflows.Rejection(err)
	require.NotNil(t, rejection, "the run fails with the rejection: %v", err)
	assert.Equal(t, "subagent depth 1 exceeds maxDepth 0", rejection.Message)
	desc, err := env.c.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	assert.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_FAILED, desc.GetWorkflowExecutionInfo().GetStatus())
	record(t, run, "spawn-rejected")
}
