package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/workflows"
)

// starterJSON is the --json object of `starter run` and `starter result`.
type starterJSON struct {
	WorkflowID string          `json:"workflowId"`
	RunID      string          `json:"runId"`
	ChildID    string          `json:"childId"`
	Depth      int64           `json:"depth"`
	StopReason string          `json:"stopReason"`
	Output     string          `json:"output"`
	Structured json.RawMessage `json:"structured"`
	EndMessage string          `json:"endMessage"`
}

// starterCmd is the starter binary with args, pointed at the shared server.
func starterCmd(ctx context.Context, dir string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, env.starter, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+env.srv.FrontendAddr(), "TEMPORAL_NAMESPACE="+env.srv.Namespace())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// exitCode returns the exit code of a finished command.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// runStarter runs the starter to its end and returns its exit code, stdout and stderr.
func runStarter(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd, stdout, stderr := starterCmd(ctx, dir, args...)
	code := exitCode(t, cmd.Run())
	return code, stdout.String(), stderr.String()
}

func decodeStarterJSON(t *testing.T, stdout string) starterJSON {
	t.Helper()
	var res starterJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), "stdout: %s", stdout)
	return res
}

// TestStarterExitCodes runs `starter run --json` as users do and checks its exit codes
// (contract R-81): 0 completed, 4 max-tokens, 1 error, 3 aborted, 2 rejected before publish.
func TestStarterExitCodes(t *testing.T) {
	dir := t.TempDir()
	scripted := func(responses ...string) []string {
		return []string{"run", "--json", "--model-provider", "scripted", "--model", script(t, dir, responses...)}
	}

	t.Run("completed", func(t *testing.T) {
		code, stdout, stderr := runStarter(t, dir, append(scripted(`{"text": "all done", "chunks": 2}`), "do it")...)
		require.Equal(t, 0, code, "stderr: %s", stderr)
		res := decodeStarterJSON(t, stdout)
		assert.Equal(t, "completed", res.StopReason)
		assert.Equal(t, "all done", res.Output)
		assert.Equal(t, workflows.WorkflowID(res.ChildID), res.WorkflowID)
		assert.NotEmpty(t, res.RunID)
		assert.EqualValues(t, 1, res.Depth)
		assert.Equal(t, "null", string(res.Structured))
	})

	t.Run("structured", func(t *testing.T) {
		schema := dir + "/schema.json"
		require.NoError(t, os.WriteFile(schema, []byte(`{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}`), 0o644))
		args := append(scripted(`{"toolCalls": [{"name": "structured_output", "input": {"n": 7}}]}`), "--schema", schema, "count")
		code, stdout, stderr := runStarter(t, dir, args...)
		require.Equal(t, 0, code, "stderr: %s", stderr)
		assert.JSONEq(t, `{"n": 7}`, string(decodeStarterJSON(t, stdout).Structured))
	})

	t.Run("max-tokens", func(t *testing.T) {
		code, stdout, stderr := runStarter(t, dir, append(scripted(`{"text": "cut sho", "finish": "length"}`), "--max-tokens", "5", "talk")...)
		require.Equal(t, 4, code, "stderr: %s", stderr)
		res := decodeStarterJSON(t, stdout)
		assert.Equal(t, "max-tokens", res.StopReason)
		assert.Equal(t, "cut sho", res.Output)
	})

	t.Run("error", func(t *testing.T) {
		code, stdout, stderr := runStarter(t, dir, append(scripted(`{"error": "model exploded"}`), "fail")...)
		require.Equal(t, 1, code, "stderr: %s", stderr)
		res := decodeStarterJSON(t, stdout)
		assert.Equal(t, "error", res.StopReason)
		assert.Contains(t, res.EndMessage, "model exploded", "the result says why the turn ended")

		code, _, stderr = runStarter(t, dir, "result", res.WorkflowID)
		require.Equal(t, 1, code, "stderr: %s", stderr)
		assert.Contains(t, stderr, "ended error (child "+res.ChildID+"): "+res.EndMessage)
	})

	t.Run("cancelled", func(t *testing.T) {
		id := "e2e-starter-cancel-" + uuid.NewString()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		cmd, stdout, stderr := starterCmd(ctx, dir, append(scripted(`{"text": "`+slowText+`", "chunks": 20, "delayMs": 20000}`), "--id", id, "slow")...)
		require.NoError(t, cmd.Start())
		require.Eventually(t, func() bool {
			st, err := subflow.Describe(ctx, env.c, id, "")
			return err == nil && st.Progress != nil && st.Progress.Tail != ""
		}, waitLimit, 50*time.Millisecond)
		code, out, errOut := runStarter(t, dir, "cancel", id)
		require.Equal(t, 0, code, "stdout %s stderr %s", out, errOut)

		require.Equal(t, 3, exitCode(t, cmd.Wait()), "stderr: %s", stderr)
		res := decodeStarterJSON(t, stdout.String())
		assert.Equal(t, "aborted", res.StopReason)
		assert.NotEmpty(t, res.Output, "the partial output is kept")
		assert.NotEqual(t, slowText, res.Output, "the run was cancelled mid-stream")
		assert.Equal(t, id, res.WorkflowID)

		// result gives the same aborted outcome from the Canceled run's details.
		code, out, errOut = runStarter(t, dir, "result", "--json", id)
		require.Equal(t, 3, code, "stderr: %s", errOut)
		again := decodeStarterJSON(t, out)
		assert.Equal(t, res.Output, again.Output)
		assert.Equal(t, res.ChildID, again.ChildID)
	})

	t.Run("rejected", func(t *testing.T) {
		code, stdout, stderr := runStarter(t, dir, append(scripted(`{"text": "never"}`), "--max-depth", "0", "deep")...)
		assert.Equal(t, 2, code)
		assert.Empty(t, stdout)
		assert.Equal(t, "subagent depth 1 exceeds maxDepth 0\n", stderr)

		schema := dir + "/any.json"
		require.NoError(t, os.WriteFile(schema, []byte(`{"type": "object"}`), 0o644))
		code, _, stderr = runStarter(t, dir, append(scripted(`{"text": "never"}`), "--provider", "sdk", "--schema", schema, "x")...)
		assert.Equal(t, 2, code)
		assert.Equal(t, "subagent provider \"sdk\" does not support the \"outputSchema\" capability\n", stderr)
	})

	t.Run("bad usage", func(t *testing.T) {
		code, _, _ := runStarter(t, dir, "run", "--json")
		assert.Equal(t, 2, code, "a run without TASK")
		code, _, stderr := runStarter(t, dir, "run", "--model-provider", "scripted", "x")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "--model")
	})
}

// TestStarterTokenBudget: `starter run --token-budget N` ends the run max-tokens (exit 4)
// once the script's usage crosses N, before the script's final answer.
func TestStarterTokenBudget(t *testing.T) {
	dir := t.TempDir()
	path := script(t, dir, `{"toolCalls": [{"name": "list_dir", "input": {}}]}`, `{"text": "never reached"}`)
	code, stdout, stderr := runStarter(t, dir, "run", "--json", "--model-provider", "scripted", "--model", path,
		"--token-budget", "5", "look around")
	require.Equal(t, 4, code, "stderr: %s", stderr)
	res := decodeStarterJSON(t, stdout)
	assert.Equal(t, "max-tokens", res.StopReason)
	assert.NotContains(t, res.Output, "never reached")

	code, stdout, stderr = runStarter(t, dir, "run", "--json", "--model-provider", "scripted", "--model", path, "look around")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, "never reached", decodeStarterJSON(t, stdout).Output, "without a budget the script runs to its answer")
}
