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
