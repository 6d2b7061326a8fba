package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestCancelWhileWorkerDown cancels a run whose only worker process was SIGKILLed mid-stream.
// Once a worker comes back the run ends Canceled with the aborted result and the partial
// output streamed before the kill, the child's turn ends aborted (cause parent), and nothing
// keeps running: the drive is never retried and no activity is left pending.
func TestCancelWhileWorkerDown(t *testing.T) {
	t.Parallel()
	f := newFaultEnv(t, "")
	store := f.openStore()
	dir := t.TempDir()
	w1 := f.startWorker()
	pub, run := f.start(rootInput(subagent.ProviderSpawn, dir, slowScript(t, dir), "stream slowly"))
	pendingActivity(t, f.c, run, workflows.ActivityDrive, func(_ enumsState, p workflows.Progress) bool {
		return p.Tail != ""
	})
	w1.kill()
	require.NoError(t, f.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	f.startWorker()

	out, cancelled := outcome(t, run)
	require.True(t, cancelled)
	assertAbortedPartial(t, out, pub.ChildID)

	tr := checkTranscript(t, store, pub.ChildID)
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent}, tr.end)
	attempts, _ := activityAttempts(history(t, env.c, run))
	assert.Equal(t, int32(1), attempts[workflows.ActivityDrive], "a cancelled drive is not retried")
	desc, err := f.c.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus())
	assert.Empty(t, desc.GetPendingActivities())
	record(t, run, "spawn-cancelled-worker-down")
}
