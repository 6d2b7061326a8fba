package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
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
//   - before publish: Publish is blocked reading the parent session;
//   - between publish and drive: Drive is waiting for the child's session lease;
//   - after the drive, before the result read: ReadResult is blocked reading the child.
//
// Every case ends with exactly one child of the parent, its one tool call run once, and the
// correct result, on a second worker process.
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
		Provider: workflows.ProviderSpawn,
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
		pendingActivity(t, f.c, described, workflows.ActivityPublish, func(s enumsState, _ workflows.Progress) bool {
			return s == enumspb.PENDING_ACTIVITY_STATE_STARTED
		})
	case "before-drive":
		pendingActivity(t, f.c, described, workflows.ActivityDrive, func(_ enumsState, p workflows.Progress) bool {
			return p.Phase == "leasing"
		})
	case "before-read":
		pendingActivity(t, f.c, described, workflows.ActivityDrive, func(_ enumsState, p workflows.Progress) bool {
			return p.Phase == "running"
		})
		// The drive holds the lease until it is done: take it after the drive, and with it
		// the events file, before ReadResult reads it.
		unlock = lockFile(t, filepath.Join(root, childID, "lease"))
		unlockEvents := lockFile(t, filepath.Join(root, childID, "events.jsonl"))
		unlockLease := unlock
		unlock = func() { unlockEvents(); unlockLease() }
		pendingActivity(t, f.c, described, workflows.ActivityReadResult, func(s enumsState, _ workflows.Progress) bool {
			return s == enumspb.PENDING_ACTIVITY_STATE_STARTED
		})
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

	attempts, _ := activityAttempts(history(t, env.c, waitRun()))
	retried := map[string]string{
		"before-publish": workflows.ActivityPublish,
		"before-drive":   workflows.ActivityDrive,
		"before-read":    workflows.ActivityReadResult,
	}[phase]
	assert.Equal(t, int32(2), attempts[retried], "the worker was killed in %s", retried)
	if phase == "before-read" {
		assert.Equal(t, int32(1), attempts[workflows.ActivityDrive], "the finished drive is not redone")
	}
	record(t, waitRun(), "spawn-killed-"+phase)
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
