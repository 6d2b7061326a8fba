package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// TestSDKChildDelegates: an sdk child's subagent tool delegates through its worker: to a
// spawn child, to an sdk child, and to a spawn child asking for a cap its depth exceeds. The
// two runs are child workflows of the sdk run (visible as its descendants, by parent workflow
// and by SubagentParent), their answers are the sdk child's tool results, and the third call
// gets the exact contract depth message. The worker's sdk runtimes run with
// --subagent-max-depth provider-managed: a numeric cap cannot be sent to the sdk provider,
// which lacks depthLimit (contract R-9).
func TestSDKChildDelegates(t *testing.T) {
	f := newFaultEnv(t, "")
	bin, err := workerBin()
	require.NoError(t, err)
	f.startWorker("--sdk-command", bin, "--sdk-arg", app.ChildRuntimeArg,
		"--sdk-arg", "--subagent-max-depth=provider-managed")
	dir := t.TempDir()
	leaf := script(t, dir, `{"text": "leaf done"}`)
	sdkLeaf := script(t, dir, `{"text": "sdk leaf done"}`)
	parent := script(t, dir,
		subagentCall(t,
			map[string]any{"task": "spawned", "label": "spawn from sdk", "provider": "spawn", "model": leaf},
			map[string]any{"task": "sdk", "label": "sdk from sdk", "provider": "sdk", "model": sdkLeaf, "modelProvider": "scripted"},
			map[string]any{"task": "too deep", "provider": "spawn", "model": leaf, "maxDepth": 1}),
		`{"text": "sdk parent done"}`)
	pub, run := f.start(rootInput(subagent.ProviderSDK, dir, parent, "delegate from an sdk child"))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out workflows.Outcome
	require.NoError(t, run.Get(ctx, &out))
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "sdk parent done", session.JoinText(out.Result.Output))
	assert.EqualValues(t, 1, out.Depth)
	record(t, run, "sdk-nested")

	spawnID := workflows.WorkflowID(subagenttool.NestedChildID(pub.ChildID, "call_0_0"))
	sdkID := workflows.WorkflowID(subagenttool.NestedChildID(pub.ChildID, "call_0_1"))
	deepID := workflows.WorkflowID(subagenttool.NestedChildID(pub.ChildID, "call_0_2"))
	var spawned, sdkRun workflows.Outcome
	require.NoError(t, env.c.GetWorkflow(ctx, spawnID, "").Get(ctx, &spawned))
	require.NoError(t, env.c.GetWorkflow(ctx, sdkID, "").Get(ctx, &sdkRun))
	assert.Equal(t, "leaf done", session.JoinText(spawned.Result.Output))
	assert.EqualValues(t, 2, spawned.Depth)
	assert.Equal(t, "sdk leaf done", session.JoinText(sdkRun.Result.Output))
	assert.EqualValues(t, 2, sdkRun.Depth)
	rejection := workflows.Rejection(env.c.GetWorkflow(ctx, deepID, "").Get(ctx, nil))
	require.NotNil(t, rejection)
	assert.Equal(t, "subagent depth 2 exceeds maxDepth 1", rejection.Message)

	// Descendants of the sdk run, the way Temporal and the tree find them.
	for _, query := range []string{
		fmt.Sprintf("ParentWorkflowId = '%s'", run.GetID()),
		fmt.Sprintf("SubagentParent = '%s'", pub.ChildID),
	} {
		counts := waitStatusesAny(t, query, 3)
		for _, id := range []string{spawnID, sdkID, deepID} {
			assert.Equal(t, 1, counts[id], "%s lists %s", query, id)
		}
	}
	waitStatuses(t, fmt.Sprintf("ParentWorkflowId = '%s' AND ExecutionStatus = 'Completed'", run.GetID()), 2,
		enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, waitLimit)
}

// waitStatusesAny polls visibility until query lists n executions and returns how often each
// workflow id is listed.
func waitStatusesAny(t testing.TB, query string, n int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	require.Eventually(t, func() bool {
		got := listAll(t, query)
		clear(counts)
		for _, e := range got {
			counts[e.GetExecution().GetWorkflowId()]++
		}
		return len(got) == n
	}, waitLimit, 200*time.Millisecond, "query %q never listed %d runs: %v", query, n, counts)
	return counts
}

// TestSDKChildCancelReachesNested cancels an sdk run while the spawn run its child delegated
// to streams: the nested run ends Canceled with its aborted outcome, and the sdk run ends
// Canceled, leaving nothing running.
func TestSDKChildCancelReachesNested(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	slow := script(t, dir, slowLeaf)
	parent := script(t, dir, subagentCall(t, map[string]any{"task": "stream slowly", "provider": "spawn", "model": slow}),
		`{"text": "never reached"}`)
	pub, run := start(t, rootInput(subagent.ProviderSDK, dir, parent, "delegate and wait"))
	nestedID := workflows.WorkflowID(subagenttool.NestedChildID(pub.ChildID, "call_0_0"))
	waitAllStreaming(t, []string{nestedID})

	require.NoError(t, env.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	out, cancelled := outcome(t, run)
	require.True(t, cancelled)
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
	nested := canceledOutcome(t, pub.ChildID, "call_0_0")
	assert.Equal(t, subagent.StopAborted, nested.Result.StopReason)
	assert.NotEmpty(t, session.JoinText(nested.Result.Output), "the nested run's partial answer is its outcome")
	waitStatuses(t, fmt.Sprintf("ParentWorkflowId = '%s'", run.GetID()), 1, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, waitLimit)
}
