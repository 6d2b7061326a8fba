package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpFrontRejectionsStartNothing: every rejection the starter can make before starting is
// made before anything starts (docs/cli.md): exit 2, a message naming the file, line or flag,
// and no workflow under the run's or batch's id (a failed one used to be left behind, listed
// in the UI).
func TestUpFrontRejectionsStartNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := script(t, dir, `{"text": "never"}`)
	schema := filepath.Join(dir, "schema.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type": "object", "patternProperties": {}}`), 0o644))
	file := filepath.Join(dir, "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	badLine := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, os.WriteFile(badLine, []byte("{\"task\": \"fine\"}\n{\"task\": \"caf\xe9\"}\n"), 0o644))
	reservedTask := filepath.Join(dir, "reserved.jsonl")
	require.NoError(t, os.WriteFile(reservedTask, []byte(`{"task": "x", "id": "subflow-admission-deepseek-official"}`+"\n"), 0o644))

	for _, tc := range []struct {
		name string
		args []string // after `run --id ID`, or the whole batch command when batch is set
		// id is the workflow id given, when the case is about the id itself.
		id     string
		batch  bool
		stderr string // a part of the message
	}{
		{name: "unsupported schema", args: []string{"--schema", schema}, stderr: "--schema " + schema + ": unsupported JSON schema"},
		{name: "cwd is a file", args: []string{"--cwd", file}, stderr: "--cwd " + file + " is not a directory"},
		{name: "max-depth -1", args: []string{"--max-depth", "-1"}, stderr: "--max-depth -1: subagent maxDepth must be a non-negative safe integer"},
		{name: "timeout 0s", args: []string{"--timeout", "0s"}, stderr: "--timeout must be positive"},
		{name: "task not UTF-8", args: []string{"caf\xe9"}, stderr: "TASK is not valid UTF-8"},
		{name: "id too long", id: strings.Repeat("i", 2000), stderr: "--id: workflow id is 2000 bytes, over the server's limit of 1000"},
		{name: "reserved id", id: "subflow-admission-deepseek-official", stderr: "--id: workflow id \"subflow-admission-deepseek-official\" is reserved"},
		{name: "batch line not UTF-8", batch: true, args: []string{badLine}, stderr: badLine + ":2: the line is not valid UTF-8"},
		{name: "batch task id reserved", batch: true, args: []string{reservedTask}, stderr: reservedTask + ":1: task id: workflow id \"subflow-admission-deepseek-official\" is reserved"},
		{name: "batch id reserved", batch: true, id: "subflow-batch", args: []string{badLine}, stderr: "--id: workflow id \"subflow-batch\" is reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id
			if id == "" {
				id = "e2e-upfront-" + uuid.NewString()
			}
			var args []string
			if tc.batch {
				args = append([]string{"batch", "--id", id}, tc.args...)
			} else {
				args = []string{"run", "--id", id, "--cwd", dir, "--model-provider", "scripted", "--model", model}
				args = append(args, tc.args...)
				if !strings.Contains(tc.name, "UTF-8") {
					args = append(args, "task")
				}
			}
			code, stdout, stderr := runStarter(t, dir, args...)
			assert.Equal(t, 2, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.stderr)
			_, err := env.c.DescribeWorkflowExecution(context.Background(), id, "")
			assert.Error(t, err, "no workflow %s was started", id)
		})
	}
}
