package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// TestWorkerKilledDuringSDKRun SIGKILLs the worker process of a running sdk child: the child
// process dies with it (no orphan is left running), and the retried RunSDKChild on a second
// worker process starts a fresh child that completes the run.
func TestWorkerKilledDuringSDKRun(t *testing.T) {
	t.Parallel()
	const text = "alpha beta gamma delta epsilon zeta eta theta"
	f := newFaultEnv(t, "")
	dir := t.TempDir()
	path := script(t, dir, `{"text": "`+text+`", "chunks": 8, "delayMs": 3000}`)

	w1 := f.startWorker()
	pub, run := f.start(rootInput(subagent.ProviderSDK, dir, path, "stream slowly"))
	pendingActivity(t, f.c, run, workflows.ActivityRunSDKChild, func(_ enumsState, p workflows.Progress) bool {
		return p.Tail != ""
	})
	first := processesOf(t, w1.pid(), app.ChildRuntimeArg)
	require.Len(t, first, 1, "the sdk child runs as a child process of the worker")

	w1.kill()
	require.Eventually(t, func() bool { return !alive(first[0]) }, waitLimit, 10*waitTick,
		"the sdk child %d outlived its worker", first[0])

	w2 := f.startWorker()
	var second []int
	pendingActivity(t, f.c, run, workflows.ActivityRunSDKChild, func(_ enumsState, p workflows.Progress) bool {
		second = processesOf(t, w2.pid(), app.ChildRuntimeArg)
		return len(second) == 1
	})
	assert.NotEqual(t, first, second, "the retry runs a fresh child")

	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, text, session.JoinText(out.Result.Output), "the fresh child answers in full")
	assert.Equal(t, pub.ChildID, out.ChildID)
	assert.False(t, alive(second[0]), "the retry's child is disposed once the run ended")
	attempts, _ := activityAttempts(history(t, env.c, run))
	assert.Equal(t, int32(2), attempts[workflows.ActivityRunSDKChild])
	record(t, run, "sdk-worker-killed")
}
