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
// keeps running: no activity is left pending. The drive runs again at most once: only if the
// server timed the killed attempt out (workflows.HeartbeatTimeout) and a worker took its
// retry before the workflow task that carries the cancel ran, which the test cannot order.
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
	tr := checkTranscript(t, store, pub.ChildID)
	assert.Equal(t, session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent}, tr.end)
	attempts, _ := activityAttempts(history(t, env.c, run))
	switch attempts[workflows.ActivityDrive] {
	case 1:
		assertAbortedPartial(t, out, pub.ChildID)
	case 2:
		// The retry restarted the step the kill cut: the partial output holds the cut step's
		// text, then the restarted step's, each a prefix of the script's text.
		t.Log("the killed drive was retried before the cancel reached the workflow")
		assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
		assert.NotEmpty(t, session.JoinText(out.Result.Output), "the partial output survives the abort")
	default:
		t.Errorf("the drive ran %d times, want at most 2", attempts[workflows.ActivityDrive])
	}
	desc, err := f.c.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus())
	assert.Empty(t, desc.GetPendingActivities())
	record(t, run, "spawn-cancelled-worker-down")
}
