package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// treeScripts writes the scripts of a delegation tree levels deep below the root run, each
// run delegating width tasks at once (one model response) and answering after their
// results; the runs at the last level answer leaf. Every delegating response also streams
// text, the partial answer of a run cancelled while it waits. It returns the root's script.
func treeScripts(t testing.TB, dir string, levels, width int, leaf string) string {
	t.Helper()
	path := script(t, dir, leaf)
	for level := levels; level >= 1; level-- {
		calls := make([]map[string]any, width)
		for i := range calls {
			calls[i] = map[string]any{"task": fmt.Sprintf("part %d", i), "label": fmt.Sprintf("L%d.%d", level, i), "model": path}
		}
		var delegate map[string]any
		require.NoError(t, json.Unmarshal([]byte(subagentCall(t, calls...)), &delegate))
		delegate["text"] = fmt.Sprintf("delegating at level %d", level-1)
		raw, err := json.Marshal(delegate)
		require.NoError(t, err)
		path = script(t, dir, string(raw), fmt.Sprintf(`{"text": "level %d done"}`, level-1))
	}
	return path
}

// treeIDs returns the workflow ids of the nested runs below the run of child rootChild, by
// level, as the deterministic ids the subagent tool calls of treeScripts name.
func treeIDs(rootChild string, levels, width int) [][]string {
	parents := []string{rootChild}
	var out [][]string
	for range levels {
		var next []string
		for _, p := range parents {
			for i := range width {
				next = append(next, activities.NestedChildID(p, fmt.Sprintf("call_0_%d", i)))
			}
		}
		ids := make([]string, len(next))
		for i, c := range next {
			ids[i] = workflows.WorkflowID(c)
		}
		out = append(out, ids)
		parents = next
	}
	return out
}

// listAll returns every execution query lists, all pages.
func listAll(t testing.TB, query string) []*workflowpb.WorkflowExecutionInfo {
	t.Helper()
	var out []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		resp, err := env.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: query, NextPageToken: token,
		})
		require.NoError(t, err)
		out = append(out, resp.GetExecutions()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out
		}
	}
}

// waitStatuses polls visibility until query lists n executions, all with status want, and
// returns how often each workflow id is listed. Visibility is eventually consistent; the
// deadline only bounds the wait.
func waitStatuses(t testing.TB, query string, n int, want enumspb.WorkflowExecutionStatus, deadline time.Duration) map[string]int {
	t.Helper()
	var got []*workflowpb.WorkflowExecutionInfo
	ok := assert.Eventually(t, func() bool {
		got = listAll(t, query)
		if len(got) != n {
			return false
		}
		for _, e := range got {
			if e.GetStatus() != want {
				return false
			}
		}
		return true
	}, deadline, 200*time.Millisecond)
	counts := map[string]int{}
	byStatus := map[string]int{}
	for _, e := range got {
		counts[e.GetExecution().GetWorkflowId()]++
		byStatus[e.GetStatus().String()]++
	}
	require.True(t, ok, "query %q: want %d executions %s, got %d: %v", query, n, want, len(got), byStatus)
	return counts
}

// TestNestedFanOutOnTwoSlots: a tree three levels deep below the root run, fan-out 4 at
// every level (1 + 4 + 16 + 64 runs), completes on a worker process with
// --max-concurrent-activities 2: a run waiting for its nested runs holds no activity slot.
// Every run completes, and every answer reaches its parent.
func TestNestedFanOutOnTwoSlots(t *testing.T) {
	const levels, width = 3, 4
	f := newFaultEnv(t, "")
	f.startWorker("--max-concurrent-activities", "2", "--subagent-max-depth", "4")
	dir := t.TempDir()
	pub, run := f.start(rootInput(subagent.ProviderSpawn, dir, treeScripts(t, dir, levels, width, `{"text": "leaf done"}`), "fan out"))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out workflows.Outcome
	require.NoError(t, run.Get(ctx, &out))
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "level 0 done", session.JoinText(out.Result.Output))

	counts := waitStatuses(t, onQueue(f.taskQueue), 1+4+16+64,
		enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, waitLimit)
	for level, ids := range treeIDs(pub.ChildID, levels, width) {
		for _, id := range ids {
			assert.Equal(t, 1, counts[id], "nested run %s at level %d ran once", id, level+1)
		}
	}
	answers := toolResultsIn(t, f.openStore(), pub.ChildID)
	assert.Len(t, answers, width)
	for _, a := range answers {
		assert.Equal(t, toolResult{"level 1 done", false}, a)
	}
}

// toolResultsIn is toolResults on store.
func toolResultsIn(t testing.TB, store session.Store, sessionID string) []toolResult {
	t.Helper()
	_, events, err := store.Load(context.Background(), sessionID)
	require.NoError(t, err)
	var out []toolResult
	for _, ev := range events {
		var d session.ToolResultData
		if ev.Type != session.TypeToolResult || ev.Decode(&d) != nil || d.Name != subagenttool.Name {
			continue
		}
		out = append(out, toolResult{session.JoinText(d.Content), d.IsError})
	}
	return out
}

// slowLeaf is a leaf answer streamed slowly enough to be cancelled mid-stream.
var slowLeaf = `{"text": "` + slowText + `", "chunks": 20, "delayMs": 20000}`

// waitAllStreaming waits until every run of ids streams its answer.
func waitAllStreaming(t testing.TB, ids []string) {
	t.Helper()
	for _, id := range ids {
		require.Eventually(t, func() bool {
			st, err := subflow.Describe(context.Background(), env.c, id, "")
			return err == nil && st.Progress != nil && st.Progress.Tail != ""
		}, 2*waitLimit, 100*time.Millisecond, "nested run %s never streamed", id)
	}
}

// TestNestedCancelTree cancels the root of a two-level tree (2 runs delegating 2 slow
// leaves each) while every leaf streams: every descendant ends Canceled with an aborted
// outcome, none is left running, and each run's partial answer is its parent's tool result.
func TestNestedCancelTree(t *testing.T) {
	t.Parallel()
	const levels, width = 2, 2
	dir := t.TempDir()
	pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, treeScripts(t, dir, levels, width, slowLeaf), "fan out slowly"))
	ids := treeIDs(pub.ChildID, levels, width)
	waitAllStreaming(t, ids[1])

	require.NoError(t, env.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	out, cancelled := outcome(t, run)
	require.True(t, cancelled)
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
	assert.Equal(t, "delegating at level 0", session.JoinText(out.Result.Output))

	const prefix = "subagent run was cancelled\nPartial output before the run ended:\n"
	assert.Equal(t, []toolResult{{prefix + "delegating at level 1", true}, {prefix + "delegating at level 1", true}},
		toolResults(t, pub.ChildID), "the root's tool results are its children's partial answers")
	for i, id := range ids[0] {
		mid := canceledOutcome(t, pub.ChildID, fmt.Sprintf("call_0_%d", i))
		assert.Equal(t, subagent.StopAborted, mid.Result.StopReason, id)
		results := toolResults(t, mid.ChildID)
		require.Len(t, results, width, "run %s has a tool result per leaf", id)
		for j, r := range results {
			leaf := canceledOutcome(t, mid.ChildID, fmt.Sprintf("call_0_%d", j))
			assert.Equal(t, subagent.StopAborted, leaf.Result.StopReason)
			partial := session.JoinText(leaf.Result.Output)
			assert.True(t, strings.HasPrefix(slowText, partial), "partial %q", partial)
			assert.Contains(t, results, toolResult{prefix + partial, true}, "leaf %d's partial answer reaches run %s", j, id)
			assert.True(t, r.IsError)
		}
	}
	query := fmt.Sprintf("SubagentParent = '%s' OR SubagentParent IN ('%s')", pub.ChildID,
		strings.Join(childIDs(ids[0]), "','"))
	waitStatuses(t, query, 2+4, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, waitLimit)
}

// canceledOutcome waits for the nested run that tool call callID of session sessionID
// started to end Canceled, and returns its details.
func canceledOutcome(t testing.TB, sessionID, callID string) workflows.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := workflows.WorkflowID(activities.NestedChildID(sessionID, callID))
	err := env.c.GetWorkflow(ctx, id, "").Get(ctx, nil)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled, "nested run %s ends Canceled", id)
	var out workflows.Outcome
	require.NoError(t, canceled.Details(&out))
	return out
}

// childIDs returns the child ids of workflow ids.
func childIDs(workflowIDs []string) []string {
	out := make([]string, len(workflowIDs))
	for i, id := range workflowIDs {
		out[i] = strings.TrimPrefix(id, "subagent-")
	}
	return out
}

// TestNestedTerminateRoot terminates the root of a two-level tree while its leaves stream:
// the parent close policy closes every descendant (Canceled) within 30 s.
func TestNestedTerminateRoot(t *testing.T) {
	t.Parallel()
	const levels, width = 2, 2
	dir := t.TempDir()
	pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, treeScripts(t, dir, levels, width, slowLeaf), "fan out slowly"))
	ids := treeIDs(pub.ChildID, levels, width)
	waitAllStreaming(t, ids[1])

	require.NoError(t, env.c.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test terminates the root"))
	query := fmt.Sprintf("SubagentParent = '%s' OR SubagentParent IN ('%s')", pub.ChildID,
		strings.Join(childIDs(ids[0]), "','"))
	waitStatuses(t, query, 2+4, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, 30*time.Second)
}

// TestNestedWorkerKilledDuringFanOut SIGKILLs the worker process while the leaves of a
// two-level tree (3 × 3) stream; a second worker process finishes the tree. Every run
// completes and every nested workflow id was started exactly once.
func TestNestedWorkerKilledDuringFanOut(t *testing.T) {
	t.Parallel()
	const levels, width = 2, 3
	f := newFaultEnv(t, "")
	w1 := f.startWorker()
	dir := t.TempDir()
	leaf := `{"text": "leaf answer", "chunks": 10, "delayMs": 3000}`
	pub, run := f.start(rootInput(subagent.ProviderSpawn, dir, treeScripts(t, dir, levels, width, leaf), "fan out"))
	ids := treeIDs(pub.ChildID, levels, width)
	waitAllStreaming(t, ids[1][:1])
	w1.kill()
	f.startWorker()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out workflows.Outcome
	require.NoError(t, run.Get(ctx, &out))
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	counts := waitStatuses(t, onQueue(f.taskQueue), 1+3+9,
		enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, waitLimit)
	for _, level := range ids {
		for _, id := range level {
			assert.Equal(t, 1, counts[id], "nested run %s started once", id)
		}
	}
	assert.Equal(t, []toolResult{{"level 1 done", false}, {"level 1 done", false},
		{"level 1 done", false}}, toolResultsIn(t, f.openStore(), pub.ChildID))
}

// statusTree is the --json tree of `starter status --tree`.
type statusTree struct {
	WorkflowID string        `json:"workflowId"`
	Provider   string        `json:"provider"`
	Depth      int64         `json:"depth"`
	Phase      string        `json:"phase"`
	StopReason string        `json:"stopReason"`
	Status     string        `json:"status"`
	Label      string        `json:"label"`
	Children   []*statusTree `json:"children"`
}

// TestStarterStatusTree: `starter status --tree ID` prints the delegation tree of a finished
// two-level run (2 × 2), one line per run, and --json the same as a JSON tree.
func TestStarterStatusTree(t *testing.T) {
	t.Parallel()
	const levels, width = 2, 2
	dir := t.TempDir()
	pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, treeScripts(t, dir, levels, width, `{"text": "leaf done"}`), "fan out"))
	_, cancelled := outcome(t, run)
	require.False(t, cancelled)
	ids := treeIDs(pub.ChildID, levels, width)
	query := fmt.Sprintf("SubagentParent = '%s' OR SubagentParent IN ('%s')", pub.ChildID,
		strings.Join(childIDs(ids[0]), "','"))
	waitStatuses(t, query, 2+4, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, waitLimit)

	code, stdout, stderr := runStarter(t, dir, "status", "--tree", "--json", run.GetID())
	require.Equal(t, 0, code, stderr)
	var root statusTree
	require.NoError(t, json.Unmarshal([]byte(stdout), &root), stdout)
	assert.Equal(t, run.GetID(), root.WorkflowID)
	assert.EqualValues(t, 1, root.Depth)
	assert.Equal(t, "completed", root.StopReason)
	require.Len(t, root.Children, width)
	for _, mid := range root.Children {
		assert.Contains(t, ids[0], mid.WorkflowID)
		assert.Equal(t, subagent.ProviderSpawn, mid.Provider)
		assert.EqualValues(t, 2, mid.Depth)
		assert.Equal(t, "completed", mid.StopReason)
		assert.Equal(t, "Completed", mid.Status)
		assert.Contains(t, []string{"L1.0", "L1.1"}, mid.Label)
		require.Len(t, mid.Children, width)
		for _, leaf := range mid.Children {
			assert.Contains(t, ids[1], leaf.WorkflowID)
			assert.EqualValues(t, 3, leaf.Depth)
			assert.Contains(t, []string{"L2.0", "L2.1"}, leaf.Label)
			assert.Empty(t, leaf.Children)
		}
	}

	code, stdout, stderr = runStarter(t, dir, "status", "--tree", run.GetID())
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 1+2+4, stdout)
	assert.Equal(t, run.GetID()+"  spawn  depth 1  completed", lines[0])
	assert.Regexp(t, `^  subagent-\S+  spawn  depth 2  completed  L1\.[01]$`, lines[1])
	assert.Regexp(t, `^    subagent-\S+  spawn  depth 3  completed  L2\.[01]$`, lines[2])
}
