package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestLeaseAcrossProcesses: while a worker process drives a child, the child's session lease
// is held, so a second drive of the same session from another process (here the test's own
// store) fails clearly with session.ErrLeased once its wait ends, and an append behind the
// driver's back is rejected with session.ErrSeqConflict; once the run is over the lease is
// free. On the file store and, with SUBFLOW_TEST_POSTGRES set, on Postgres.
func TestLeaseAcrossProcesses(t *testing.T) {
	t.Parallel()
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		leaseAcrossProcesses(t, "")
	})
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("SUBFLOW_TEST_POSTGRES")
		if url == "" {
			t.Skip("SUBFLOW_TEST_POSTGRES is not set (eval \"$(.ci/postgres.sh)\")")
		}
		t.Parallel()
		leaseAcrossProcesses(t, url)
	})
}

func leaseAcrossProcesses(t *testing.T, storeSpec string) {
	f := newFaultEnv(t, storeSpec)
	store := f.openStore()
	leaser, ok := store.(session.Leaser)
	require.True(t, ok, "the store grants leases")
	dir := t.TempDir()
	f.startWorker()
	pub, run := f.start(rootInput(subagent.ProviderSpawn, dir,
		script(t, dir, `{"text": "leased answer", "chunks": 4, "delayMs": 4000}`), "hold the lease"))
	pendingActivity(t, f.c, run, workflows.ActivityDrive, func(_ enumsState, p workflows.Progress) bool {
		return p.Tail != ""
	})

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := session.TakeLease(ctx, leaser, pub.ChildID, time.Minute)
	cancel()
	require.ErrorIs(t, err, session.ErrLeased, "a second drive of the session waits, then fails clearly")
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	_, events, err := store.Load(context.Background(), pub.ChildID)
	require.NoError(t, err)
	stale, err := session.NewEvent(session.TypeTurnStart, session.TurnStartData{Turn: 99})
	require.NoError(t, err)
	stale.Seq = int64(len(events)) - 1
	err = store.Append(context.Background(), pub.ChildID, stale)
	require.ErrorIs(t, err, session.ErrSeqConflict, "an append that does not continue the log is rejected")

	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "leased answer", session.JoinText(out.Result.Output))
	checkTranscript(t, store, pub.ChildID)

	ctx, cancel = context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	lease, err := session.TakeLease(ctx, leaser, pub.ChildID, time.Minute)
	require.NoError(t, err, "the drive released the lease")
	require.NoError(t, lease.Release())
}
