package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// sessionsIn returns the ids of the stored sessions whose cwd is dir.
func sessionsIn(t *testing.T, dir string) []string {
	t.Helper()
	resolved, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	entries, err := os.ReadDir(env.sessionRoot)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var ids []string
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(env.sessionRoot, e.Name(), "header.json"))
		if err != nil {
			continue // not a session, or one being written
		}
		var h struct {
			Cwd string `json:"cwd"`
		}
		if json.Unmarshal(raw, &h) == nil && (h.Cwd == resolved || h.Cwd == dir) {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// TestStarterRejections runs every request the starter or the workflow rejects before
// publication through the real starter: each exits 2 at once with the exact message on
// stderr, prints nothing on stdout and leaves no session behind (contract ).
func TestStarterRejections(t *testing.T) {
	t.Parallel()
	scriptDir := t.TempDir()
	model := script(t, scriptDir, `{"text": "never"}`)
	missing := "missing-" + uuid.NewString()
	for _, tc := range []struct {
		name string
		args []string
		// stderr is the exact message, or its prefix when prefix is set.
		stderr string
		prefix bool
	}{
		{name: "parent with a separator", args: []string{"--parent", "a/b"},
			stderr: "starter run: --parent: invalid session id \"a/b\": contains a path separator\n"},
		{name: "parent with a separator, detached", args: []string{"--detach", "--parent", "a/b"},
			stderr: "starter run: --parent: invalid session id \"a/b\": contains a path separator\n"},
		{name: "missing parent", args: []string{"--parent", missing},
			stderr: "subagent parent session \"" + missing + "\" not found\n"},
		{name: "unknown tool", args: []string{"--deny", "bogus_tool"},
			stderr: "tools.restrict() names unknown global tool \"bogus_tool\"; known global tools: ", prefix: true},
		{name: "depth exceeded", args: []string{"--max-depth", "0"},
			stderr: "subagent depth 1 exceeds maxDepth 0\n"},
		{name: "sdk refuses a schema", args: []string{"--provider", "sdk", "--schema", model},
			stderr: "subagent provider \"sdk\" does not support the \"outputSchema\" capability\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cwd := t.TempDir()
			args := append([]string{"run", "--json", "--cwd", cwd, "--model-provider", "scripted", "--model", model}, tc.args...)
			code, stdout, stderr := runStarter(t, cwd, append(args, "task")...)
			assert.Equal(t, 2, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			if tc.prefix {
				assert.True(t, strings.HasPrefix(stderr, tc.stderr), "stderr: %s", stderr)
				assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
			} else {
				assert.Equal(t, tc.stderr, stderr)
			}
			assert.Empty(t, sessionsIn(t, cwd), "no root session is left behind")
		})
	}
}

// TestRejectedParentIdIsNotRetried starts a run whose parent id no store accepts through the
// client: the workflow rejects it at once, with its rule, instead of retrying Publish.
func TestRejectedParentIdIsNotRetried(t *testing.T) {
	t.Parallel()
	in := rootInput(subagent.ProviderSpawn, t.TempDir(), script(t, t.TempDir(), `{"text": "never"}`), "x")
	in.Root = nil
	in.Request.Parent = subagent.ParentRef{SessionID: "a/b"}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, _, err := subflow.Start(ctx, env.c, subflow.StartOptions{TaskQueue: env.taskQueue, Input: in})
	var ve *subagent.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, workflows.RuleInvalidSessionID, ve.Rule)
	assert.Equal(t, `subagent parent session: invalid session id "a/b": contains a path separator`, ve.Message)
}
