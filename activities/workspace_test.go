package activities_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/session"
)

// TestDriveOutsideTheServedRoots: a worker serving workspace roots refuses a run whose cwd
// lies outside them, however the run was started, non-retryable and naming the host, the
// cwd and the roots; no tool runs.
func TestDriveOutsideTheServedRoots(t *testing.T) {
	f := newFixture(t, `{"toolCalls": [{"name": "write_file", "input": {"path": "x.txt", "content": "x"}}]}`, `{"text": "done"}`)
	served, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	e := newEnv(t, f.activities(func(c *activities.Config) { c.WorkspaceRoots = []string{served} }), worker.Options{})
	req := request("write")
	publish(t, e, "child-1", req)

	_, err = drive(e, "child-1", req)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.TypeOutsideWorkspace, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	host, _ := os.Hostname()
	assert.Contains(t, appErr.Message(), "cwd "+f.cwd)
	assert.Contains(t, appErr.Message(), "host "+host+" serves: "+served)
	assert.NoFileExists(t, filepath.Join(f.cwd, "x.txt"), "no tool ran")
}

// TestChildToolsRefuseEveryStateDir: an in-process child whose cwd holds another store (the
// sdk runtime's sessions, here) cannot read it: every state directory is refused to every
// child's file tools, whatever the cwd (docs/sdk-children.md).
func TestChildToolsRefuseEveryStateDir(t *testing.T) {
	f := newFixture(t,
		`{"toolCalls": [{"name": "read_file", "input": {"path": "sdk-sessions/other-run/events.jsonl"}}]}`,
		`{"text": "done"}`)
	sdkRoot := filepath.Join(f.cwd, "sdk-sessions")
	require.NoError(t, os.MkdirAll(filepath.Join(sdkRoot, "other-run"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(sdkRoot, "other-run", "events.jsonl"), []byte("another run's transcript\n"), 0o600))
	e := newEnv(t, f.activities(func(c *activities.Config) { c.Protected = []string{sdkRoot} }), worker.Options{})
	req := request("read it")
	publish(t, e, "child-1", req)
	_, err := drive(e, "child-1", req)
	require.NoError(t, err)

	var result *session.ToolResultData
	for _, ev := range f.events("child-1") {
		if ev.Type == session.TypeToolResult {
			result = &session.ToolResultData{}
			require.NoError(t, ev.Decode(result))
		}
	}
	require.NotNil(t, result)
	assert.True(t, result.IsError)
	assert.Contains(t, session.JoinText(result.Content), "inside a session store")
	assert.NotContains(t, session.JoinText(result.Content), "another run's transcript")
}
