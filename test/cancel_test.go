package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// slowText is streamed in many chunks over a long delay, so a test can cancel mid-stream.
const slowText = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"

func slowScript(t testing.TB, dir string) string {
	return script(t, dir, `{"text": "`+slowText+`", "chunks": 20, "delayMs": 20000}`)
}

// TestCancelInProcess cancels a spawn run mid-stream: the status query answers mid-run with
// the child id, the run ends Canceled, and its details hold the aborted result with the
// partial output streamed so far.
func TestCancelInProcess(t *testing.T) {
	dir := t.TempDir()
	pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, slowScript(t, dir), "stream slowly"))

	st := waitStreaming(t, run)
	assert.Equal(t, workflows.PhaseDriving, st.Phase)
	assert.Equal(t, pub.ChildID, st.ChildID, "the status query names the child mid-run")
	assert.Equal(t, subagent.ProviderSpawn, st.Provider)

	require.NoError(t, env.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	out, cancelled := outcome(t, run)
	require.True(t, cancelled)
	assertAbortedPartial(t, out, pub.ChildID)
	record(t, run, "spawn-cancelled")
}

// TestCancelSDK cancels an sdk run mid-stream: the run ends Canceled with the partial output,
// and the child process is gone (reaped, not a zombie) once the outcome is there.
func TestCancelSDK(t *testing.T) {
	waitNoChildRuntimes(t) // so that every child process seen below is this run's
	dir := t.TempDir()
	pub, run := start(t, rootInput(subagent.ProviderSDK, dir, slowScript(t, dir), "stream slowly"))

	st := waitStreaming(t, run)
	assert.Equal(t, pub.ChildID, st.ChildID)
	children := childRuntimes(t)
	require.NotEmpty(t, children, "the sdk child runs as a child process of the worker (this process)")

	require.NoError(t, env.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	out, cancelled := outcome(t, run)
	require.True(t, cancelled)
	assertAbortedPartial(t, out, pub.ChildID)
	for _, pid := range children {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
		assert.True(t, os.IsNotExist(err), "sdk child %d is still there after the run ended", pid)
	}
	record(t, run, "sdk-cancelled")
}

func assertAbortedPartial(t *testing.T, out workflows.Outcome, childID string) {
	t.Helper()
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
	assert.Equal(t, childID, out.ChildID)
	partial := session.JoinText(out.Result.Output)
	assert.NotEmpty(t, partial, "the partial output survives the abort")
	assert.True(t, strings.HasPrefix(slowText, partial), "partial output %q is a prefix of the script's text", partial)
	assert.NotEqual(t, slowText, partial, "the run was cancelled mid-stream")
}

// childRuntimes returns the pids of this process's child processes that run the sdk child
// runtime, from /proc/<pid>/stat (ppid) and /proc/<pid>/cmdline.
func childRuntimes(t testing.TB) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	var pids []int
	for _, stat := range stats {
		data, err := os.ReadFile(stat)
		if err != nil {
			continue // the process ended meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		rest := data[bytes.LastIndexByte(data, ')')+1:]
		fields := strings.Fields(string(rest))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(filepath.Dir(stat), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(app.ChildRuntimeArg)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(stat)))
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

// waitNoChildRuntimes waits until this process has no sdk child process left.
func waitNoChildRuntimes(t testing.TB) {
	t.Helper()
	require.Eventually(t, func() bool { return len(childRuntimes(t)) == 0 }, waitLimit, 50*time.Millisecond)
}
