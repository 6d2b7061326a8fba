package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestRetentionKeepsPausedBatchParents: a batch of fork and spawn tasks whose parent is the
// session of an earlier, closed run waits paused behind a running task while `starter gc`
// cleans with a 1-second retention: the parent session is kept (the batch owns it), and once
// resumed every task completes with its own answer. File store.
func TestRetentionKeepsPausedBatchParents(t *testing.T) {
	retentionPausedBatch(t, "")
}

// TestRetentionKeepsPausedBatchParentsPostgres is TestRetentionKeepsPausedBatchParents on
// the Postgres session store (SUBFLOW_TEST_POSTGRES, see .ci/postgres.sh).
func TestRetentionKeepsPausedBatchParentsPostgres(t *testing.T) {
	dsn := os.Getenv("SUBFLOW_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("SUBFLOW_TEST_POSTGRES is not set (eval \"$(.ci/postgres.sh)\")")
	}
	retentionPausedBatch(t, freshPostgresSchema(t, dsn))
}

func retentionPausedBatch(t *testing.T, storeSpec string) {
	ctx := context.Background()
	f := newFaultEnv(t, storeSpec)
	store := f.openStore()
	f.startWorker("--gc-every", "0")
	cwd := t.TempDir()

	// The earlier run, closed before the batch starts: its child session is the parent of
	// the batch's tasks.
	parentPub, parentRun := f.start(rootInput(subagent.ProviderSpawn, cwd, script(t, t.TempDir(), `{"text": "parent here"}`), "be the parent"))
	_, _ = outcome(t, parentRun)
	parentEvents := load(t, store, parentPub.ChildID)

	// Task 0 (a root task) holds the batch's one slot while the batch is paused; the others
	// wait, queued and paused, for the parent session.
	dir := t.TempDir()
	slow := script(t, dir, `{"text": "slow done", "chunks": 3, "delayMs": 1000}`)
	tasks := []workflows.Task{scriptedTask(subagent.ProviderSpawn, cwd, slow, "hold the slot")}
	for i := 1; i <= 4; i++ {
		provider, answer := subagent.ProviderSpawn, script(t, dir, fmt.Sprintf(`{"text": "task %d done"}`, i))
		if i%2 == 1 {
			// A fork's seed holds the parent's turn, which took the script's first response.
			provider, answer = subagent.ProviderFork, script(t, dir, `{"text": "parent here"}`, fmt.Sprintf(`{"text": "task %d done"}`, i))
		}
		tasks = append(tasks, workflows.Task{Provider: provider, Task: fmt.Sprintf("task %d", i),
			Parent: parentPub.ChildID, ModelProvider: model.ProviderScripted, Model: answer})
	}
	batchID := "batch-" + uuid.NewString()
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: f.taskQueue},
		workflows.BatchWorkflowName, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Total: len(tasks), Concurrency: 1,
			Defaults: workflows.TaskDefaults{Dir: cwd}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := batchProgress(t, batchID)
		return err == nil && p.Running == 1
	}, waitLimit, waitTick)
	batchUpdate(t, batchID, workflows.UpdatePause)

	// Older than a second: the earlier run closed before that, and only the batch keeps
	// its session.
	time.Sleep(1100 * time.Millisecond)
	gctx, cancel := context.WithTimeout(ctx, 2*waitLimit)
	defer cancel()
	res, err := subflow.RunCleanup(gctx, env.c, subflow.CleanupOptions{TaskQueue: f.taskQueue, OlderThan: time.Second})
	require.NoError(t, err)
	t.Logf("the cleanup: %+v", res)
	assert.Positive(t, res.Checked, "the cleanup looked at the earlier run's sessions")
	assert.Contains(t, ownedIDs(t, store), parentPub.ChildID, "the paused batch's parent session is kept")
	assert.Equal(t, parentEvents, load(t, store, parentPub.ChildID), "and intact")

	p, err := batchProgress(t, batchID)
	require.NoError(t, err)
	assert.True(t, p.Paused)
	assert.Equal(t, len(tasks)-1, p.Total-p.Done-p.Running, "the parent's tasks wait: %+v", p)

	batchUpdate(t, batchID, workflows.UpdateResume)
	wctx, wcancel := context.WithTimeout(ctx, 2*waitLimit)
	defer wcancel()
	var sum workflows.BatchSummary
	require.NoError(t, run.Get(wctx, &sum))
	assert.Equal(t, len(tasks), sum.ByStopReason[subagent.StopCompleted], "every task completes: %+v", sum)
	results := readResults(t, env.c, batchID)
	require.Len(t, results, len(tasks))
	for i := 1; i < len(tasks); i++ {
		assert.Empty(t, results[i].Error, "task %d: %+v", i, results[i])
		assert.Equal(t, subagent.StopCompleted, results[i].StopReason, "task %d", i)
		assert.Equal(t, fmt.Sprintf("task %d done", i), results[i].Output, "task %d", i)
	}
}

// batchUpdate sends a batch control update and waits for its answer.
func batchUpdate(t *testing.T, batchID, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	h, err := env.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: batchID, UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil), "update %s", name)
}

// TestCleanupCountsAcrossRetries: a cleanup whose worker is killed mid-page, after it
// removed part of the page, is retried on another worker, and its report counts every
// session removed, by both attempts: the store's owned sessions before minus after.
// File store.
func TestCleanupCountsAcrossRetries(t *testing.T) {
	t.Parallel()
	cleanupCountsAcrossRetries(t, "")
}

// TestCleanupCountsAcrossRetriesPostgres is TestCleanupCountsAcrossRetries on the Postgres
// session store (SUBFLOW_TEST_POSTGRES, see .ci/postgres.sh).
func TestCleanupCountsAcrossRetriesPostgres(t *testing.T) {
	t.Parallel()
	dsn := os.Getenv("SUBFLOW_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("SUBFLOW_TEST_POSTGRES is not set (eval \"$(.ci/postgres.sh)\")")
	}
	cleanupCountsAcrossRetries(t, freshPostgresSchema(t, dsn))
}

func cleanupCountsAcrossRetries(t *testing.T, storeSpec string) {
	ctx := context.Background()
	f := newFaultEnv(t, storeSpec)
	store := f.openStore()
	w := f.startWorker("--gc-every", "0")
	cwd := t.TempDir()
	answer := script(t, t.TempDir(), `{"text": "done"}`)
	for i := range 6 {
		_, run := f.start(rootInput(subagent.ProviderSpawn, cwd, answer, fmt.Sprintf("run %d", i)))
		_, _ = outcome(t, run)
	}
	before := ownedIDs(t, store)
	require.GreaterOrEqual(t, len(before), 12, "a root and a child session per run")
	time.Sleep(1100 * time.Millisecond)

	// The cleanup removes what precedes the session the test holds locked, then waits.
	halfway := before[len(before)/2]
	release := lockOwners(t, f.store, halfway)
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflows.CleanupScheduleID + "-retried-" + uuid.NewString(), TaskQueue: f.taskQueue,
	}, workflows.CleanupWorkflowName, workflows.CleanupInput{OlderThan: time.Second})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ids := ownedIDs(t, store)
		return !slices.ContainsFunc(ids, func(id string) bool { return id < halfway })
	}, waitLimit, waitTick, "the cleanup never reached %s", halfway)
	w.kill()
	release()
	f.startWorker("--gc-every", "0")

	wctx, cancel := context.WithTimeout(ctx, 2*waitLimit)
	defer cancel()
	var res workflows.CleanupResult
	require.NoError(t, run.Get(wctx, &res))
	t.Logf("the retried cleanup: %+v", res)
	assert.Empty(t, ownedIDs(t, store), "every closed run's session is gone")
	assert.Equal(t, len(before), res.Total().Items, "the report counts what the killed attempt removed too")
	assert.Equal(t, len(before), res.Checked)
	assert.Zero(t, res.Kept)
	assert.Equal(t, 1, res.Runs)
}
