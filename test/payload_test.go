package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStarterBigResult runs a child whose answer is 5 MB, over Temporal's 2 MiB payload
// limit: the run completes, its history stays small (the answer travels by reference through
// the session store), and `starter result` prints the whole answer, fetched through
// Temporal rather than from the store.
func TestStarterBigResult(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	answer := strings.Repeat("0123456789abcdef", 5<<20/16) // 5 MiB
	text, err := json.Marshal(answer)
	require.NoError(t, err)
	scriptPath := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(scriptPath, []byte(`{"responses": [{"text": `+string(text)+`, "chunks": 40}]}`), 0o644))

	code, stdout, stderr := runStarter(t, dir, "run", "--json", "--detach", "--model-provider", "scripted", "--model", scriptPath, "talk a lot")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var ids starterJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &ids))

	code, stdout, stderr = runStarter(t, dir, "result", "--json", ids.WorkflowID)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	res := decodeStarterJSON(t, stdout)
	assert.Equal(t, "completed", res.StopReason)
	assert.Equal(t, len(answer), len(res.Output))
	assert.True(t, res.Output == answer, "the whole answer, byte for byte")

	desc, err := env.c.DescribeWorkflowExecution(context.Background(), ids.WorkflowID, "")
	require.NoError(t, err)
	assert.Less(t, desc.GetWorkflowExecutionInfo().GetHistorySizeBytes(), int64(256<<10),
		"the answer is not in the run's history")
}

// TestStarterBigSchema runs a structured child with a 1.5 MB --schema: the run completes,
// and the schema is in its history once (the workflow input), not once per activity.
func TestStarterBigSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const schemaSize = 1500 << 10
	desc, err := json.Marshal(strings.Repeat("d", schemaSize))
	require.NoError(t, err)
	schema := filepath.Join(dir, "schema.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type": "object", "description": `+string(desc)+
		`, "properties": {"n": {"type": "integer"}}, "required": ["n"]}`), 0o644))
	model := script(t, dir, `{"toolCalls": [{"name": "structured_output", "input": {"n": 7}}]}`)

	code, stdout, stderr := runStarter(t, dir, "run", "--json", "--model-provider", "scripted", "--model", model, "--schema", schema, "count")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	res := decodeStarterJSON(t, stdout)
	assert.JSONEq(t, `{"n": 7}`, string(res.Structured))

	info, err := env.c.DescribeWorkflowExecution(context.Background(), res.WorkflowID, res.RunID)
	require.NoError(t, err)
	size := info.GetWorkflowExecutionInfo().GetHistorySizeBytes()
	t.Logf("history of a run with a %d-byte schema: %d bytes", schemaSize, size)
	assert.Less(t, size, int64(schemaSize+256<<10), "the schema is in history once, in the workflow input")
}
