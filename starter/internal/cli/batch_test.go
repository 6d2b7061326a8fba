package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

func writeTasks(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return path
}

func TestBatchPlan(t *testing.T) {
	path := writeTasks(t,
		`{"task": "one", "label": "a"}`,
		``,
		`{"task": "two", "provider": "fork", "parent": "p1"}`)
	f := batchFlags{concurrency: 3, taskQueue: "q", id: "b1"}
	p, err := f.plan(path)
	require.NoError(t, err)
	in := p.in
	assert.Equal(t, "b1", in.BatchID)
	assert.Equal(t, 2, in.Total)
	assert.Len(t, in.Tasks, 2, "a small batch travels inline")
	assert.Empty(t, p.paged)
	assert.Equal(t, strings.TrimSuffix(path, ".jsonl")+".results.jsonl", p.outFile, "written by the starter")
	assert.Equal(t, 3, in.Concurrency)
	assert.Equal(t, "q", in.TaskQueue)
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, wd, in.Defaults.Dir)
	assert.Equal(t, defaultModel, in.Defaults.Route.Model)
}

// TestBatchPlanLargeFilePaged: a large batch keeps its first tasks inline and hands the
// others over in pages, in order; the file's path goes nowhere.
func TestBatchPlanLargeFilePaged(t *testing.T) {
	lines := make([]string, subflow.InlineMaxTasks+7)
	for i := range lines {
		lines[i] = `{"task": "t` + strconv.Itoa(i) + `"}`
	}
	path := writeTasks(t, lines...)
	p, err := (&batchFlags{concurrency: 1, detach: true}).plan(path)
	require.NoError(t, err)
	assert.Len(t, p.in.Tasks, subflow.InlineMaxTasks)
	require.Len(t, p.paged, 7)
	assert.Equal(t, "t"+strconv.Itoa(subflow.InlineMaxTasks), p.paged[0].Task)
	assert.Equal(t, subflow.InlineMaxTasks+7, p.in.Total)
	assert.Empty(t, p.outFile, "a detached batch writes no results file")
	raw, err := json.Marshal(p.in)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), path)
}

// TestBatchPlanRejects: a bad task stops the batch before it starts, naming file and line.
func TestBatchPlanRejects(t *testing.T) {
	for want, lines := range map[string][]string{
		":2: not a task object: json: unknown field \"prompt\"": {`{"task": "ok"}`, `{"prompt": "x"}`},
		":3: missing \"task\"":                                      {`{"task": "ok"}`, ``, `{"label": "x"}`},
		":1: no subagent provider registered for \"nope\"":          {`{"task": "x", "provider": "nope"}`},
		":1: task: model-provider scripted needs model SCRIPT.json": {`{"task": "x", "model-provider": "scripted"}`},
		": no tasks": {``},
	} {
		path := writeTasks(t, lines...)
		_, err := (&batchFlags{concurrency: 1}).plan(path)
		var ue *usageError
		require.ErrorAs(t, err, &ue, want)
		assert.Equal(t, "starter batch: "+path+want, err.Error())
	}
	_, err := (&batchFlags{concurrency: 0}).plan(writeTasks(t, `{"task": "x"}`))
	assert.EqualError(t, err, "starter batch: --concurrency must be at least 1: 0")
}

func TestPrintBatchSummary(t *testing.T) {
	s := workflows.BatchSummary{BatchID: "b1", Total: 5, Done: 4, Failed: 1, OutFile: "/r.jsonl",
		ByStopReason: map[subagent.StopReason]int{subagent.StopCompleted: 2, subagent.StopAborted: 1}}
	s.Durations.Add(2 * time.Millisecond)
	var b strings.Builder
	printBatchSummary(&b, s)
	assert.Equal(t, `batch b1: 4 of 5 tasks done, results in /r.jsonl
stop reason  count
completed    2
aborted      1
max-tokens   0
refusal      0
error        1
not started  1
tokens       0 in, 0 out
duration     p50 2ms  p99 2ms
`, b.String())
	assert.Equal(t, "batch b1: 4/5 done (0 running, 0 queued, 2 completed, 1 failed)", progressLine("b1", s))
}

// TestBatchPlanAcceptsABOM: a tasks file an editor saved with a UTF-8 byte order mark reads
// like one without.
func TestBatchPlanAcceptsABOM(t *testing.T) {
	path := writeTasks(t, "\ufeff"+`{"task": "one"}`, `{"task": "two"}`)
	p, err := (&batchFlags{concurrency: 1}).plan(path)
	require.NoError(t, err)
	require.Len(t, p.in.Tasks, 2)
	assert.Equal(t, "one", p.in.Tasks[0].Task)

	// The one BOM rule: only at the start of the file, as for a --schema file.
	path = writeTasks(t, `{"task": "one"}`, "\ufeff"+`{"task": "two"}`)
	_, err = (&batchFlags{concurrency: 1}).plan(path)
	assert.ErrorContains(t, err, path+":2: not a task object")
}

// TestBatchPlanReportsEveryBadLine: every bad task is reported at once, each with its line,
// before anything starts: bad fields, a duplicate id, a cwd that does not exist, a task over
// the size limit.
func TestBatchPlanReportsEveryBadLine(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("x", workflows.MaxStartInputBytes)
	path := writeTasks(t,
		`{"task": "ok", "id": "wf-1"}`,
		`{"task": "bad", "max-tokens": "ten"}`,
		`{"task": "again", "id": "wf-1"}`,
		`{"task": "nowhere", "cwd": "`+filepath.Join(dir, "missing")+`"}`,
		`{"task": "`+big+`"}`,
		`{"task": "fine"}`)
	_, err := (&batchFlags{concurrency: 1}).plan(path)
	var ue *usageError
	require.ErrorAs(t, err, &ue)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 4, "%s", err)
	assert.Equal(t, "starter batch: "+path+":2: not a task object: json: cannot unmarshal string into Go struct field Task.max-tokens of type int64", lines[0])
	assert.Equal(t, "starter batch: "+path+`:3: task id "wf-1" is also the id of line 1`, lines[1])
	assert.Equal(t, "starter batch: "+path+":4: task: cwd "+filepath.Join(dir, "missing")+" is not a directory", lines[2])
	assert.True(t, strings.HasPrefix(lines[3], "starter batch: "+path+":5: task: "), lines[3])
	assert.True(t, strings.HasSuffix(lines[3], " bytes, over the limit of 2031616 bytes per task"), lines[3])
}
