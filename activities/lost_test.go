package activities_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// errHeartbeatLost is the kind of cause the SDK cancels an activity with when its heartbeats
// cannot reach the server (a server restart): not the workflow's cancel.
var errHeartbeatLost = errors.New("context deadline exceeded")

// TestDriveLosingTheServerLeavesTheTurnForTheRetry: a drive whose context ends for another
// cause than the workflow's cancel does not abort the child. Its turn stays unfinished, the
// error is retryable, and the retry completes the turn with the scripted answer.
func TestDriveLosingTheServerLeavesTheTurnForTheRetry(t *testing.T) {
	f := newFixture(t, `{"text": "the answer after all", "chunks": 2, "delayMs": 30000}`)
	bg, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e := newEnv(t, f.activities(), worker.Options{BackgroundActivityContext: bg})
	req := request("take your time")
	publish(t, e, "child-1", req)

	errc := make(chan error, 1)
	go func() {
		_, err := drive(e, "child-1", req)
		errc <- err
	}()
	waitFor(t, "the child's step", func() bool { return f.hasEvent("child-1", session.TypeStepStart) })
	cancel(errHeartbeatLost)
	err := receive(t, "the drive", errc)
	require.Error(t, err)
	assert.False(t, temporal.IsCanceledError(err), "not a cancellation: %v", err)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		assert.False(t, appErr.NonRetryable(), "the retry resumes the turn")
	}
	assert.Empty(t, turnEnds(t, f.events("child-1")), "the turn stays unfinished")

	// The retry's model answers at once (a fresh worker reads the script again).
	require.NoError(t, os.WriteFile(filepath.Join(f.cwd, "script.json"),
		[]byte(`{"responses": [{"text": "the answer after all", "chunks": 2}]}`), 0o644))
	retry := newEnv(t, f.activities(), worker.Options{})
	_, err = drive(retry, "child-1", req)
	require.NoError(t, err)
	out := readResult(t, retry, "child-1", req, false)
	assert.Equal(t, subagent.Result{Output: []session.Block{session.Text("the answer after all")}, StopReason: subagent.StopCompleted}, out.Result)
}
