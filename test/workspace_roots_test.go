package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestWorkspaceRootsAreABoundary: a worker serving --workspace-root refuses every run whose
// cwd resolves outside its roots, whoever started it (docs/deployment.md): a symlink under
// the root leading out (which the starter's lexical check lets through), and a StartSubagent
// started directly on the queue with cwd "/". The refusal is non-retryable and names the
// host, the cwd and the roots; the file outside is never read.
func TestWorkspaceRootsAreABoundary(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("the secret\n"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "link")))
	model := script(t, outside, `{"toolCalls": [{"name": "read_file", "input": {"path": "secret.txt"}}]}`, `{"text": "done"}`)

	f := newFaultEnv(t, "")
	f.startWorker("--workspace-root", root)
	host, _ := os.Hostname()
	for _, cwd := range []string{filepath.Join(root, "link"), "/"} {
		t.Run(cwd, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			in := rootInput(subagent.ProviderSpawn, cwd, model, "read secret.txt")
			run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "e2e-roots-" + uuid.NewString(), TaskQueue: f.taskQueue},
				workflows.StartSubagent, in)
			require.NoError(t, err)
			var out workflows.Outcome
			err = run.Get(ctx, &out)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr, "outcome %+v", out)
			assert.Equal(t, activities.TypeOutsideWorkspace, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			assert.Contains(t, appErr.Message(), "cwd "+cwd)
			assert.Contains(t, appErr.Message(), "host "+host+" serves: "+root)
		})
	}
}

// TestWorkerRefusesAQueueTheServerRefuses: a worker whose task queue's interactive lane is
// longer than the server's limit.maxIDLength (the queue itself within it) exits at its start
// with an error naming the lane and the server's reason, instead of reporting ready while
// the lane's pollers fail.
func TestWorkerRefusesAQueueTheServerRefuses(t *testing.T) {
	f := newFaultEnv(t, "")
	queue := strings.Repeat("q", workflows.MaxWorkflowIDLength-5)
	w := f.startWorkerOn(queue, "--gc-every", "0")
	select {
	case <-w.done:
	case <-time.After(waitLimit):
		t.Fatal("the worker did not exit")
	}
	assert.Equal(t, 1, w.cmd.ProcessState.ExitCode())
	log, err := os.ReadFile(w.log)
	require.NoError(t, err)
	assert.Contains(t, string(log), `task queue \"interactive:qqqq`)
	assert.Contains(t, string(log), `bytes) is refused by the server: taskQueue length exceeds limit`)
	assert.NotContains(t, string(log), "worker ready")
}
