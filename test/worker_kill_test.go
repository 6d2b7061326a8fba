package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// writeSteps is a script of n slow steps, each writing its own file with the built-in
// write_file tool, and a final answer.
func writeSteps(n, delayMs int) []string {
	var responses []string
	for i := range n {
		responses = append(responses, fmt.Sprintf(
			`{"delayMs": %d, "toolCalls": [{"name": "write_file", "input": {"path": "step-%02d.txt", "content": "step %d"}}]}`,
			delayMs, i, i))
	}
	return append(responses, fmt.Sprintf(`{"text": "wrote %d files, one per step", "chunks": 4, "delayMs": %d}`, n, delayMs))
}

// TestWorkerKilledMidDrive SIGKILLs the worker process running a spawn child's turn after a
// few of its tool calls ran; a second worker process resumes the turn from the session store.
// The result equals an uninterrupted run's, no tool call whose result was stored runs again
// (the kernel counts every write of every file), and the transcript holds no duplicated or
// torn events.
func TestWorkerKilledMidDrive(t *testing.T) {
	t.Parallel()
	workerKilledMidDrive(t, "", "spawn-worker-killed")
}

// TestWorkerKilledMidDrivePostgres is TestWorkerKilledMidDrive with both worker processes on
// the Postgres session store (SUBFLOW_TEST_POSTGRES, see .ci/postgres.sh).
func TestWorkerKilledMidDrivePostgres(t *testing.T) {
	url := os.Getenv("SUBFLOW_TEST_POSTGRES")
	if url == "" {
		t.Skip("SUBFLOW_TEST_POSTGRES is not set (eval \"$(.ci/postgres.sh)\")")
	}
	t.Parallel()
	workerKilledMidDrive(t, url, "")
}

func workerKilledMidDrive(t *testing.T, storeSpec, recordAs string) {
	const steps = 8
	responses := writeSteps(steps, 400)

	// The uninterrupted run, on the package's in-process worker.
	controlDir := t.TempDir()
	_, controlRun := start(t, rootInput(subagent.ProviderSpawn, controlDir, script(t, t.TempDir(), responses...), "write the files"))

	f := newFaultEnv(t, storeSpec)
	store := f.openStore()
	cwd := t.TempDir()
	writes := countWrites(t, cwd)
	w1 := f.startWorker()
	pub, run := f.start(rootInput(subagent.ProviderSpawn, cwd, script(t, t.TempDir(), responses...), "write the files"))

	writes.waitFiles(t, 3)
	w1.kill()
	stored, ended := storedResults(t, store, pub.ChildID)
	require.False(t, ended, "the worker was killed mid-turn")
	require.NotEmpty(t, stored, "the worker was killed after some tool calls ran")
	t.Logf("killed the worker after %d stored tool results", len(stored))

	f.startWorker()
	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	want, cancelled := outcome(t, controlRun)
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, want.Result, out.Result, "the result equals the uninterrupted run's")

	tr := checkTranscript(t, store, pub.ChildID)
	assert.Equal(t, session.EndCompleted, tr.end.Kind)
	control := checkTranscript(t, openFileStore(t, env.sessionRoot), want.ChildID)
	assert.Equal(t, control.messages, tr.messages, "the same assistant messages as the uninterrupted run")
	// Step numbers may differ: a step cut mid-stream by the kill is started again as the next.
	assert.Equal(t, stepless(control.results), stepless(tr.results), "the same tool results as the uninterrupted run")

	counts := writes.settle(t)
	total := 0
	for id, path := range tr.paths {
		n := counts[path]
		total += n
		if stored[id] {
			assert.Equal(t, 1, n, "tool call %s (%s) had its result stored before the kill: it runs once", id, path)
		} else {
			assert.GreaterOrEqual(t, n, 1, "tool call %s (%s) ran", id, path)
		}
		data, err := os.ReadFile(filepath.Join(cwd, path))
		require.NoError(t, err)
		var i int
		_, err = fmt.Sscanf(path, "step-%02d.txt", &i)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("step %d", i), string(data))
	}
	assert.Len(t, tr.paths, steps)
	assert.LessOrEqual(t, total, steps+1, "at most the one tool call in flight at the kill runs twice")

	attempts, _ := activityAttempts(history(t, env.c, run))
	assert.GreaterOrEqual(t, attempts[workflows.ActivityDrive], int32(2), "the drive was retried")
	if recordAs != "" {
		record(t, run, recordAs)
	}
}

// stepless returns results without their step numbers.
func stepless(results []session.ToolResultData) []session.ToolResultData {
	out := make([]session.ToolResultData, len(results))
	for i, r := range results {
		r.Step = 0
		out[i] = r
	}
	return out
}
