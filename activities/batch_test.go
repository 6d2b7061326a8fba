package activities

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/workflows"
)

// TestReadBatchTasksPages reads a tasks file page by page, skipping blank lines, and the
// positions handed from page to page cover every task once.
func TestReadBatchTasksPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	body := `{"task": "a"}` + "\n\n" + `{"task": "b"}` + "\n" + `{"task": "c", "label": "l"}` + "\n" + `{"task": "d"}`
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	a := &Activities{}
	ctx := context.Background()

	page, err := a.ReadBatchTasks(ctx, workflows.ReadBatchTasksInput{Path: path, Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []workflows.Task{{Task: "a"}, {Task: "b"}}, page.Tasks)
	assert.Equal(t, 4, page.Total, "a read from the start counts the tasks")
	assert.Equal(t, 3, page.Line)
	assert.False(t, page.Done)

	page, err = a.ReadBatchTasks(ctx, workflows.ReadBatchTasksInput{Path: path, Offset: page.Offset, Line: page.Line, Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []workflows.Task{{Task: "c", Label: "l"}, {Task: "d"}}, page.Tasks)
	assert.Zero(t, page.Total)
	assert.True(t, page.Done, "the last line needs no newline")
	assert.EqualValues(t, len(body), page.Offset)
}

func TestReadBatchTasksErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"task": "a"}`+"\n"+`{"tsk": "b"}`+"\n"), 0o644))
	a := &Activities{}
	_, err := a.ReadBatchTasks(context.Background(), workflows.ReadBatchTasksInput{Path: path, Limit: 10})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, TypeInvalidBatchTask, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, path+`:2: not a task object: json: unknown field "tsk"`, appErr.Message())

	_, err = a.ReadBatchTasks(context.Background(), workflows.ReadBatchTasksInput{Path: filepath.Join(dir, "missing"), Limit: 10})
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, TypeBatchFile, appErr.Type())
	assert.True(t, appErr.NonRetryable())
}

// TestAppendBatchResultsIdempotent: a retried append (same offset) leaves each result once.
func TestAppendBatchResultsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("stale results of an earlier batch\n"), 0o644))
	a := &Activities{}
	ctx := context.Background()
	first := workflows.AppendBatchResultsInput{Path: path, Results: []workflows.BatchResult{{Index: 0, Output: "<a>"}}}
	size, err := a.AppendBatchResults(ctx, first)
	require.NoError(t, err)
	second := workflows.AppendBatchResultsInput{Path: path, Offset: size, Results: []workflows.BatchResult{{Index: 1, Output: "b"}}}
	_, err = a.AppendBatchResults(ctx, second)
	require.NoError(t, err)
	end, err := a.AppendBatchResults(ctx, second) // the retry of a call whose answer was lost
	require.NoError(t, err)

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.EqualValues(t, len(raw), end)
	assert.Equal(t, []string{
		`{"index":0,"output":"<a>","durationMs":0}`,
		`{"index":1,"output":"b","durationMs":0}`,
	}, strings.Split(strings.TrimSpace(string(raw)), "\n"))
}
