package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

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

// planChecked plans the batch of the tasks file at path and checks its tasks, unrouted.
func planChecked(f batchFlags, path string) (batchPlan, error) {
	p, err := f.plan(path)
	if err == nil {
		err = p.check(nil)
	}
	return p, err
}

// handOverAll hands the tasks of a checked plan over, unrouted, and returns the batch's
// input as started and the pages sent after it.
func handOverAll(t *testing.T, p batchPlan) (in workflows.BatchInput, pages []workflows.TaskPage) {
	t.Helper()
	require.NoError(t, p.handOver(nil,
		func(bi workflows.BatchInput) error { in = bi; return nil },
		func(page workflows.TaskPage) error { pages = append(pages, page); return nil }))
	return in, pages
}

func TestBatchPlan(t *testing.T) {
	path := writeTasks(t,
		`{"task": "one", "label": "a"}`,
		``,
		`{"task": "two", "provider": "fork", "parent": "p1"}`)
	p, err := planChecked(batchFlags{concurrency: 3, taskQueue: "q", id: "b1"}, path)
	require.NoError(t, err)
	in, pages := handOverAll(t, p)
	assert.Equal(t, "b1", in.BatchID)
	assert.Equal(t, 2, in.Total)
	assert.Len(t, in.Tasks, 2, "a small batch travels inline")
	assert.Empty(t, pages)
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
	p, err := planChecked(batchFlags{concurrency: 1, detach: true}, path)
	require.NoError(t, err)
	in, pages := handOverAll(t, p)
	assert.Len(t, in.Tasks, subflow.InlineMaxTasks)
	require.Len(t, pages, 1)
	assert.Equal(t, workflows.TaskPage{Page: 0, First: subflow.InlineMaxTasks}, workflows.TaskPage{Page: pages[0].Page, First: pages[0].First})
	require.Len(t, pages[0].Tasks, 7)
	assert.Equal(t, "t"+strconv.Itoa(subflow.InlineMaxTasks), pages[0].Tasks[0].Task)
	assert.Equal(t, subflow.InlineMaxTasks+7, in.Total)
	assert.Empty(t, p.outFile, "a detached batch writes no results file")
	raw, err := json.Marshal(in)
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
		_, err := planChecked(batchFlags{concurrency: 1}, path)
		var ue *usageError
		require.ErrorAs(t, err, &ue, want)
		assert.Equal(t, "starter batch: "+path+want, err.Error())
	}
	_, err := (&batchFlags{concurrency: 0}).plan(writeTasks(t, `{"task": "x"}`))
	assert.EqualError(t, err, "starter batch: --concurrency must be at least 1: 0")
}

func TestPrintBatchSummary(t *testing.T) {
	s := workflows.BatchSummary{BatchID: "b1", Total: 6, Done: 5, Failed: 1, OutFile: "/r.jsonl",
		ByStopReason: map[subagent.StopReason]int{subagent.StopCompleted: 2, subagent.StopAborted: 1, subagent.StopError: 1}}
	s.Durations.Add(2 * time.Millisecond)
	var b strings.Builder
	printBatchSummary(&b, s)
	// A run that ended with stop reason error and a task with no outcome are two rows, as on
	// the batch's page: one "error" row held both counts after a row of its own for the first.
	assert.Equal(t, `batch b1: 5 of 6 tasks done, results in /r.jsonl
stop reason  count
completed    2
aborted      1
max-tokens   0
refusal      0
error        1
failed       1
not started  1
tokens       0 in, 0 out
duration     p50 2ms  p99 2ms
`, b.String())
	// The progress line's counts add up to the done ones: a run that ended aborted or with
	// stop reason error is neither completed nor failed.
	assert.Equal(t, "batch b1: 5/6 done (0 running, 0 queued, 2 completed, 1 aborted, 1 error, 1 failed)", progressLine("b1", s))
	// A stop reason this starter does not know comes after the known ones.
	s.ByStopReason = map[subagent.StopReason]int{subagent.StopCompleted: 2, "paused": 1, subagent.StopError: 1}
	assert.Equal(t, "batch b1: 5/6 done (0 running, 0 queued, 2 completed, 1 error, 1 paused, 1 failed)", progressLine("b1", s))
}

// TestBatchPlanAcceptsABOM: a tasks file an editor saved with a UTF-8 byte order mark reads
// like one without.
func TestBatchPlanAcceptsABOM(t *testing.T) {
	path := writeTasks(t, "\ufeff"+`{"task": "one"}`, `{"task": "two"}`)
	p, err := planChecked(batchFlags{concurrency: 1}, path)
	require.NoError(t, err)
	in, _ := handOverAll(t, p)
	require.Len(t, in.Tasks, 2)
	assert.Equal(t, "one", in.Tasks[0].Task)

	// The one BOM rule: only at the start of the file, as for a --schema file.
	path = writeTasks(t, `{"task": "one"}`, "\ufeff"+`{"task": "two"}`)
	_, err = planChecked(batchFlags{concurrency: 1}, path)
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
	_, err := planChecked(batchFlags{concurrency: 1}, path)
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

// countingReader passes a tasks file through, counting the bytes and lines read from it.
type countingReader struct {
	r            io.ReadCloser
	bytes, lines int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.bytes += n
	c.lines += bytes.Count(p[:n], []byte{'\n'})
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// TestBatchTasksStream: a 100,000-line tasks file is checked in one pass, then handed over as
// it is read a second time: the batch starts and gets its first page before the file is read
// to its end, and the starter never holds more than two pages of tasks read but not handed.
func TestBatchTasksStream(t *testing.T) {
	const total = 100_000
	var b strings.Builder
	for i := range total {
		fmt.Fprintf(&b, `{"task": "task %d", "id": "task-%d"}`+"\n", i, i)
	}
	path := writeTasks(t, strings.TrimSuffix(b.String(), "\n"))
	size := b.Len()

	p, err := (&batchFlags{concurrency: 1, detach: true}).plan(path)
	require.NoError(t, err)
	var readers []*countingReader
	p.file.open = func() (io.ReadCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		r := &countingReader{r: f}
		readers = append(readers, r)
		return r, nil
	}
	require.NoError(t, p.check(nil))
	require.Len(t, readers, 1)
	assert.Equal(t, size, readers[0].bytes, "the check reads the whole file")
	assert.Equal(t, total, p.in.Total)

	handed, held := 0, 0
	startedAt, firstPageAt := -1, -1
	err = p.handOver(nil, func(in workflows.BatchInput) error {
		require.Len(t, readers, 2, "the tasks are read again")
		startedAt = readers[1].bytes
		held = max(held, readers[1].lines-handed)
		handed += len(in.Tasks)
		return nil
	}, func(page workflows.TaskPage) error {
		require.Equal(t, handed, page.First, "pages come in order, each after the last")
		if firstPageAt < 0 {
			firstPageAt = readers[1].bytes
		}
		held = max(held, readers[1].lines-handed)
		handed += len(page.Tasks)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, total, handed)
	assert.Less(t, startedAt, size, "the batch starts before its file is read to the end")
	assert.Less(t, firstPageAt, size/10, "the first page goes before the file is read to its end")
	assert.LessOrEqual(t, held, 2*workflows.MaxPageTasks, "tasks read but not yet handed over")
	assert.Greater(t, held, 0)
	t.Logf("held %d, first page at %d of %d bytes", held, firstPageAt, size)
}

// TestBatchPriorityFlags: the batch's tasks run at --priority (default behind runs) under
// --fairness-key (default the batch's id) with --weight; values the server would refuse are
// refused first, naming the flag.
func TestBatchPriorityFlags(t *testing.T) {
	f := batchFlags{concurrency: 1}
	require.NoError(t, f.check("starter batch"))
	assert.Equal(t, temporal.Priority{PriorityKey: workflows.BatchPriority, FairnessKey: "b1"}, f.taskPriority("b1"))
	assert.Greater(t, workflows.BatchPriority, workflows.RunPriority, "runs go first")
	f = batchFlags{concurrency: 1, priority: 1, fairnessKey: "team-a", weight: 3}
	require.NoError(t, f.check("starter batch"))
	assert.Equal(t, temporal.Priority{PriorityKey: 1, FairnessKey: "team-a", FairnessWeight: 3}, f.taskPriority("b1"))
	for want, f := range map[string]batchFlags{
		"starter batch: --priority must be 1 (highest) to 5: 6":                    {concurrency: 1, priority: 6},
		"starter batch: --fairness-key is 65 bytes, over the server's limit of 64": {concurrency: 1, fairnessKey: strings.Repeat("k", 65)},
		"starter batch: --weight must be 0.001 to 1000: 2000":                      {concurrency: 1, weight: 2000},
	} {
		err := f.check("starter batch")
		var ue *usageError
		require.ErrorAs(t, err, &ue, want)
		assert.EqualError(t, err, want)
	}
}

// TestBatchPlanRefusesAnOverlongLineUnread: a line longer than any task could be is reported
// without being held whole, and the lines after it are read as usual.
func TestBatchPlanRefusesAnOverlongLineUnread(t *testing.T) {
	path := writeTasks(t, `{"task": "`+strings.Repeat("x", maxLineBytes)+`"}`, `{"task": "fine"}`, `{"nope": 1}`)
	_, err := planChecked(batchFlags{concurrency: 1}, path)
	var ue *usageError
	require.ErrorAs(t, err, &ue)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2, "%s", err)
	assert.Equal(t, fmt.Sprintf("starter batch: %s:1: the line is over %d bytes: no task that long fits the limit of %d bytes per task",
		path, maxLineBytes, workflows.MaxStartInputBytes), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "starter batch: "+path+":3: "), lines[1])
}
