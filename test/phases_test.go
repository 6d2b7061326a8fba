package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sys/unix"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestWorkerKilledAtEachPhase SIGKILLs the worker process at each phase boundary of a spawn
// run, pinned there by holding a file lock of the session store from the test process:
//
//   - before publish: Publish (a local activity) is blocked reading the parent session, in
//     the run's first workflow task;
//   - between publish and drive: Drive is waiting for the child's session lease;
//   - after the drive, before the result read: ReadResult (a local activity) is blocked
//     reading the child, in the workflow task after the drive.
//
// Every case ends with exactly one child of the parent, its one tool call run once, and the
// correct result, on a second worker process: a killed local activity runs again in the
// workflow task retried after the killed one timed out, a killed Drive in its retry.
func TestWorkerKilledAtEachPhase(t *testing.T) {
	t.Parallel()
	for _, phase := range []string{"before-publish", "before-drive", "before-read"} {
		t.Run(phase, func(t *testing.T) {
			t.Parallel()
			killedAtPhase(t, phase)
		})
	}
}

func killedAtPhase(t *testing.T, phase string) {
	f := newFaultEnv(t, "")
	store := f.openStore()
	cwd, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	writes := countWrites(t, cwd)
	route := session.Route{Provider: model.ProviderScripted, Model: script(t, t.TempDir(),
		`{"delayMs": 1500, "toolCalls": [{"name": "write_file", "input": {"path": "a.txt", "content": "a"}}]}`,
		`{"text": "phase answer", "chunks": 2, "delayMs": 1500}`)}
	parentID := uuid.NewString()
	require.NoError(t, store.Create(context.Background(), session.Header{ID: parentID, Cwd: cwd, Route: &route}))
	childID := uuid.NewString()
	in := workflows.StartInput{
		Provider: subagent.ProviderSpawn,
		ChildID:  childID,
		Request: subagent.Request{
			Prompt: []session.Block{session.Text("write a")},
			Parent: subagent.ParentRef{SessionID: parentID},
		},
	}
	root := f.store
	var unlock func()
	if phase == "before-publish" {
		unlock = lockFile(t, filepath.Join(root, parentID, "events.jsonl"))
	}
	if phase == "before-drive" {
		require.NoError(t, os.MkdirAll(filepath.Join(root, childID), 0o755))
		unlock = lockFile(t, filepath.Join(root, childID, "lease"))
	}

	w1 := f.startWorker()
	started := make(chan client.WorkflowRun, 1)
	go func() {
		_, run := f.start(in)
		started <- run
	}()
	run := client.WorkflowRun(nil)
	waitRun := func() client.WorkflowRun {
		if run == nil {
			run = <-started
		}
		return run
	}
	described := env.c.GetWorkflow(context.Background(), workflows.WorkflowID(childID), "")
	switch phase {
	case "before-publish":
		workflowTaskStarted(t, f.c, described)
	case "before-drive":
		pendingActivity(t, f.c, described, workflows.ActivityDrive, func(_ enumsState, p workflows.Progress) bool {
			return p.Phase == "leasing"
		})
	case "before-read":
		pendingActivity(t, f.c, described, workflows.ActivityDrive, func(_ enumsState, p workflows.Progress) bool {
			return p.Phase == "running"
		})
		// The drive releases the lease when it is done: lock the events file then, before
		// ReadResult (a server round trip and a workflow task later) reads it.
		leaseReleased(t, filepath.Join(root, childID, "lease"))
		unlock = lockFile(t, filepath.Join(root, childID, "events.jsonl"))
		workflowTaskStarted(t, f.c, described)
	}
	w1.kill()
	unlock()
	f.startWorker()

	out, cancelled := outcome(t, waitRun())
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "phase answer", session.JoinText(out.Result.Output))
	assert.Equal(t, childID, out.ChildID)

	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	children := 0
	for _, e := range entries {
		hd, _, err := store.Load(context.Background(), e.Name())
		if err == nil && hd.ParentSession == parentID {
			children++
		}
	}
	assert.Equal(t, 1, children, "exactly one child of the parent")
	tr := checkTranscript(t, store, childID)
	assert.Equal(t, session.EndCompleted, tr.end.Kind)
	assert.Equal(t, map[string]int{"a.txt": 1}, writes.settle(t), "the tool call ran once")

	events := history(t, env.c, waitRun())
	attempts, _ := activityAttempts(events)
	if phase == "before-drive" {
		assert.Equal(t, int32(2), attempts[workflows.ActivityDrive], "the worker was killed in Drive")
	} else {
		assert.Equal(t, 1, workflowTaskTimeouts(events), "the worker was killed in a workflow task")
		assert.Equal(t, int32(1), attempts[workflows.ActivityDrive], "the drive ran once")
	}
	record(t, waitRun(), "spawn-killed-"+phase)
}

// leaseReleased polls a file store's lease file until its lease was granted and released
// (released leases keep their token and have no expiry).
func leaseReleased(t testing.TB, path string) {
	t.Helper()
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(path)
		var st struct{ Token, Expires int64 }
		return err == nil && json.Unmarshal(data, &st) == nil && st.Token > 0 && st.Expires == 0
	}, 2*waitLimit, time.Millisecond, "%s: the lease was never released", path)
}

// workflowTaskStarted polls the run until a worker has started its pending workflow task and
// holds it: what a local activity that is still running looks like from outside.
func workflowTaskStarted(t testing.TB, c client.Client, run client.WorkflowRun) {
	t.Helper()
	require.Eventually(t, func() bool {
		desc, err := c.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
		return err == nil && len(desc.GetPendingActivities()) == 0 &&
			desc.GetPendingWorkflowTask().GetState() == enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED
	}, 2*waitLimit, waitTick, "run %s: no started workflow task", run.GetID())
}

// workflowTaskTimeouts counts the run's timed-out workflow tasks.
func workflowTaskTimeouts(events []*historypb.HistoryEvent) int {
	n := 0
	for _, ev := range events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT {
			n++
		}
	}
	return n
}

// lockFile takes an exclusive flock of path (created if absent), blocking until it is free,
// and returns its release.
func lockFile(t testing.TB, path string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	require.NoError(t, err)
	released := false
	unlock = func() {
		if !released {
			released = true
			_ = f.Close()
		}
	}
	t.Cleanup(unlock)
	return unlock
}
