package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// toolCalls is a scripted response calling each tool of calls (name, input JSON) once.
func toolCalls(calls ...[2]string) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, fmt.Sprintf(`{"name": %q, "input": %s}`, c[0], c[1]))
	}
	return `{"toolCalls": [` + strings.Join(parts, ",") + `]}`
}

// digestOf returns what a finished run shows: its status query's digest, checked against
// its Current Details (the same digest as Markdown) and the bound, and the run's result,
// which never carries it.
func digestOf(t *testing.T, run client.WorkflowRun, out workflows.Outcome) *subagent.Digest {
	t.Helper()
	assert.Nil(t, out.Digest, "the run's result does not repeat the digest")
	st, err := subflow.Describe(context.Background(), env.c, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	require.NotNil(t, st.Digest, "run %s has no digest", run.GetID())
	raw, err := json.Marshal(st.Digest)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(raw), subagent.MaxDigestBytes)
	assert.Equal(t, st.Digest.Markdown(), currentDetails(t, run.GetID(), run.GetRunID()))
	return st.Digest
}

// currentDetails reads a run's Current Details as the Web UI does, with the SDK's built-in
// metadata query (the Go SDK exports no name for it).
func currentDetails(t testing.TB, workflowID, runID string) string {
	t.Helper()
	v, err := env.c.QueryWorkflow(context.Background(), workflowID, runID, "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

// storedToolError returns the first line of the error result of call callID in a session of
// the worker's store: what the digest must show of it.
func storedToolError(t testing.TB, sessionID, callID string) string {
	t.Helper()
	_, events, err := openFileStore(t, env.sessionRoot).Load(context.Background(), sessionID)
	require.NoError(t, err)
	for _, ev := range events {
		var d session.ToolResultData
		if ev.Type == session.TypeToolResult && ev.Decode(&d) == nil && d.CallID == callID {
			require.True(t, d.IsError, "call %s did not fail", callID)
			return subagent.FirstLine(session.JoinText(d.Content), 160)
		}
	}
	t.Fatalf("session %s has no result for call %s", sessionID, callID)
	return ""
}

// checkSteps checks the digest's steps beside the tools each is expected to call, by name,
// input and result; tokens are counted and times are not negative.
func checkSteps(t *testing.T, d *subagent.Digest, want [][]subagent.DigestTool) {
	t.Helper()
	require.Len(t, d.Steps, len(want))
	for i, s := range d.Steps {
		assert.Equal(t, i+1, s.Step)
		assert.Positive(t, s.InputTokens, "step %d", s.Step)
		assert.GreaterOrEqual(t, s.DurationMs, int64(0))
		require.Len(t, s.Tools, len(want[i]), "step %d", s.Step)
		for j, tool := range s.Tools {
			assert.GreaterOrEqual(t, tool.DurationMs, int64(0))
			tool.DurationMs = 0
			if want[i][j].Error == "*" { // any first line: checked by the caller
				want[i][j].Error = tool.Error
			}
			assert.Equal(t, want[i][j], tool, "step %d tool %d", s.Step, j)
		}
	}
}

// TestDigestOfRuns runs the kinds of runs there are and checks, field by field, the digest
// each shows in its status, its Current Details and within its bound.
func TestDigestOfRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("some notes\n"), 0o644))
	readTwice := toolCalls([2]string{"read_file", `{"path": "notes.txt"}`}, [2]string{"read_file", `{"path": "missing.txt"}`})
	wantReadTwice := []subagent.DigestTool{
		{Name: "read_file", Input: "notes.txt", Result: subagent.ToolResultOK},
		{Name: "read_file", Input: "missing.txt", Result: subagent.ToolResultError, Error: "*"},
	}
	spawnScript := script(t, dir, readTwice, `{"text": "spawn done"}`, `{"text": "fork answer"}`)

	var spawnChild string
	t.Run("spawn", func(t *testing.T) {
		pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, spawnScript, "read the notes"))
		spawnChild = pub.ChildID
		out, cancelled := outcome(t, run)
		require.False(t, cancelled)
		d := digestOf(t, run, out)
		assert.Equal(t, subagent.DigestFull, d.Level)
		assert.Equal(t, subagent.StopCompleted, d.StopReason)
		assert.Equal(t, 2, d.TotalSteps)
		assert.Equal(t, 2, d.ToolCalls)
		assert.Equal(t, 1, d.ToolErrors)
		assert.Equal(t, out.Usage.InputTokens, d.InputTokens)
		assert.Equal(t, out.Usage.OutputTokens, d.OutputTokens)
		assert.Equal(t, "spawn done", d.Answer)
		checkSteps(t, d, [][]subagent.DigestTool{wantReadTwice, nil})
		stored := storedToolError(t, pub.ChildID, "call_0_1")
		assert.Contains(t, stored, "missing.txt")
		assert.Equal(t, stored, d.Steps[0].Tools[1].Error)
		assert.Contains(t, currentDetails(t, run.GetID(), ""), "| read_file | `missing.txt` | error: "+stored)

		// starter status prints the same steps, and --json the same digest.
		code, stdout, stderr := runStarter(t, dir, "status", run.GetID())
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "steps     2, 2 tool calls (1 failed)")
		assert.Regexp(t, `(?m)^1 +\d+/\d+ +\S+ +read_file +notes\.txt +ok `, stdout)
		assert.Contains(t, stdout, "missing.txt")
		assert.Contains(t, stdout, "error: "+stored)
		assert.Contains(t, stdout, "answer    spawn done")
		code, stdout, stderr = runStarter(t, dir, "status", "--json", run.GetID())
		require.Equal(t, 0, code, stderr)
		var st workflows.Status
		require.NoError(t, json.Unmarshal([]byte(stdout), &st))
		assert.Equal(t, d, st.Digest)
	})

	t.Run("fork", func(t *testing.T) {
		require.NotEmpty(t, spawnChild)
		_, run := start(t, workflows.StartInput{Provider: subagent.ProviderFork, Request: subagent.Request{
			Prompt: []session.Block{session.Text("and then?")}, Parent: subagent.ParentRef{SessionID: spawnChild},
		}})
		out, _ := outcome(t, run)
		d := digestOf(t, run, out)
		// The seed's steps are the parent's: the fork's digest holds its own step alone.
		assert.Equal(t, 1, d.TotalSteps)
		assert.Zero(t, d.ToolCalls)
		assert.Equal(t, "fork answer", d.Answer)
		checkSteps(t, d, [][]subagent.DigestTool{nil})
	})

	t.Run("sdk", func(t *testing.T) {
		pub, run := start(t, rootInput(subagent.ProviderSDK, dir, script(t, dir, readTwice, `{"text": "sdk done"}`), "read the notes"))
		out, _ := outcome(t, run)
		d := digestOf(t, run, out)
		assert.Equal(t, subagent.StopCompleted, d.StopReason)
		assert.Equal(t, 2, d.TotalSteps)
		assert.Equal(t, 1, d.ToolErrors)
		assert.Equal(t, "sdk done", d.Answer)
		checkSteps(t, d, [][]subagent.DigestTool{wantReadTwice, nil})
		assert.Contains(t, d.Steps[0].Tools[1].Error, "missing.txt", "the runtime's tool error, reported over the wire")
		assert.Equal(t, out.Usage.OutputTokens, d.OutputTokens)
		assert.Equal(t, pub.ChildID, out.ChildID)
	})

	t.Run("structured", func(t *testing.T) {
		in := rootInput(subagent.ProviderSpawn, dir, script(t, dir,
			`{"toolCalls": [{"name": "structured_output", "input": {"answer": 42, "why": "scripted"}}]}`), "report structured")
		in.Request.OutputSchema = json.RawMessage(`{"type": "object", "properties": {"answer": {"type": "integer"}, "why": {"type": "string"}}, "required": ["answer"]}`)
		_, run := start(t, in)
		out, _ := outcome(t, run)
		d := digestOf(t, run, out)
		assert.Equal(t, subagent.StopCompleted, d.StopReason)
		checkSteps(t, d, [][]subagent.DigestTool{{{Name: "structured_output", Result: subagent.ToolResultOK}}})
	})

	t.Run("nested", func(t *testing.T) {
		inner := script(t, dir, `{"text": "inner done"}`)
		pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, script(t, dir,
			subagentCall(t, map[string]any{"task": "look deeper", "label": "inner", "model": inner}),
			`{"text": "outer done"}`), "delegate"))
		out, _ := outcome(t, run)
		d := digestOf(t, run, out)
		nestedID := workflows.WorkflowID(subagenttool.NestedChildID(pub.ChildID, "call_0_0"))
		checkSteps(t, d, [][]subagent.DigestTool{
			{{Name: subagenttool.Name, Input: "inner", Result: subagent.ToolResultOK, WorkflowID: nestedID}}, nil,
		})
		assert.Equal(t, "outer done", d.Answer)
		assert.Contains(t, currentDetails(t, run.GetID(), ""), "[subagent](/namespaces/{namespace}/workflows/"+nestedID+")")
		// The link leads to the nested run, whose own digest is its own turn.
		nested := env.c.GetWorkflow(context.Background(), nestedID, "")
		nestedOut, _ := outcome(t, nested)
		assert.Equal(t, "inner done", digestOf(t, nested, nestedOut).Answer)
	})

	t.Run("failing tool", func(t *testing.T) {
		pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, script(t, dir,
			toolCalls([2]string{"write_file", `{"path": "/etc/subflow-digest", "content": "never written"}`}),
			`{"text": "could not write"}`), "write outside"))
		out, _ := outcome(t, run)
		d := digestOf(t, run, out)
		checkSteps(t, d, [][]subagent.DigestTool{
			{{Name: "write_file", Input: "/etc/subflow-digest", Result: subagent.ToolResultError, Error: "*"}}, nil,
		})
		assert.Equal(t, storedToolError(t, pub.ChildID, "call_0_0"), d.Steps[0].Tools[0].Error)
		assert.NotContains(t, fmt.Sprint(d), "never written", "a tool's content input is never shown")
	})

	t.Run("cancelled mid-tool", func(t *testing.T) {
		leaf := script(t, dir, toolCalls([2]string{"read_file", `{"path": "notes.txt"}`}), slowLeaf)
		pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, script(t, dir,
			subagentCall(t, map[string]any{"task": "stream slowly", "label": "slow", "model": leaf}),
			`{"text": "never reached"}`), "delegate and wait"))
		nestedID := workflows.WorkflowID(subagenttool.NestedChildID(pub.ChildID, "call_0_0"))
		waitAllStreaming(t, []string{nestedID})
		// While the leaf streams its second step, its heartbeats name the tool call before.
		st, err := subflow.Describe(context.Background(), env.c, nestedID, "")
		require.NoError(t, err)
		require.NotNil(t, st.Progress)
		assert.Equal(t, 2, st.Progress.Steps)
		assert.Equal(t, "read_file notes.txt: ok", st.Progress.LastTool)
		assert.Contains(t, st.Progress.Summary, "last tool read_file notes.txt: ok")

		require.NoError(t, env.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
		out, cancelled := outcome(t, run)
		require.True(t, cancelled)
		d := digestOf(t, run, out)
		assert.Equal(t, subagent.StopAborted, d.StopReason)
		require.Len(t, d.Steps, 1)
		require.Len(t, d.Steps[0].Tools, 1)
		call := d.Steps[0].Tools[0]
		assert.Equal(t, subagenttool.Name, call.Name)
		assert.Equal(t, nestedID, call.WorkflowID)
		assert.NotEqual(t, subagent.ToolResultOK, call.Result, "the call the cancel cut short did not succeed")
		nested := env.c.GetWorkflow(context.Background(), nestedID, "")
		nestedOut, _ := outcome(t, nested)
		nd := digestOf(t, nested, nestedOut)
		assert.Equal(t, subagent.StopAborted, nd.StopReason)
		assert.Equal(t, 2, nd.TotalSteps)
	})

	t.Run("200 steps", func(t *testing.T) {
		// A script of 200 steps: the agent's step limit ends the turn at 50 (a worker has no
		// higher one), and twelve calls a step with long inputs overflow the bound well
		// before. subagent's TestDigestBound builds digests of 200 and 5,000 steps.
		var calls [][2]string
		for i := range 12 {
			calls = append(calls, [2]string{"read_file", fmt.Sprintf(`{"path": "missing-%02d-%s.txt"}`, i, strings.Repeat("x", 60))})
		}
		responses := make([]string, 200)
		for i := range responses {
			responses[i] = toolCalls(calls...)
		}
		_, run := start(t, rootInput(subagent.ProviderSpawn, dir, script(t, dir, responses...), "take many steps"))
		out, _ := outcome(t, run)
		d := digestOf(t, run, out)
		assert.Equal(t, subagent.StopError, d.StopReason)
		assert.Equal(t, "turn stopped at the step limit of 50 steps without a final answer", d.EndMessage)
		assert.Equal(t, 50, d.TotalSteps)
		assert.Equal(t, 600, d.ToolCalls)
		assert.Equal(t, 600, d.ToolErrors)
		assert.Positive(t, d.OmittedSteps)
		assert.Equal(t, 50, len(d.Steps)+d.OmittedSteps)
		assert.Equal(t, 1, d.Steps[0].Step, "the first step is kept")
		assert.Equal(t, 50, d.Steps[len(d.Steps)-1].Step, "the last step is kept")
		assert.Contains(t, currentDetails(t, run.GetID(), ""), fmt.Sprintf("%d steps omitted", d.OmittedSteps))
	})
}

// TestDigestCanary: a secret in a file the child reads and one in the worker's environment
// never reach any event of the histories of the runs that read it (in-process, sdk, and a
// nested run), though the child did read the file.
func TestDigestCanary(t *testing.T) {
	fileSecret := "CANARY-FILE-" + uuid.NewString()
	envSecret := "CANARY-ENV-" + uuid.NewString()
	t.Setenv("SUBFLOW_DIGEST_CANARY", envSecret) // the worker runs in this process
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secret.txt"), []byte(fileSecret+"\n"), 0o644))
	read := toolCalls([2]string{"read_file", `{"path": "secret.txt"}`}, [2]string{"grep", `{"pattern": "CANARY"}`})
	leaf := script(t, dir, read, `{"text": "read it"}`)

	var runs []client.WorkflowRun
	for _, provider := range []string{subagent.ProviderSpawn, subagent.ProviderSDK} {
		_, run := start(t, rootInput(provider, dir, script(t, dir, read,
			subagentCall(t, map[string]any{"task": "read the secret too", "provider": "spawn", "model": leaf}),
			`{"text": "done"}`), "read secret.txt"))
		out, _ := outcome(t, run)
		d := digestOf(t, run, out)
		require.Len(t, d.Steps, 3)
		require.Len(t, d.Steps[0].Tools, 2)
		assert.Equal(t, subagent.ToolResultOK, d.Steps[0].Tools[0].Result, "%s read the file", provider)
		nested := d.Steps[1].Tools[0].WorkflowID
		require.NotEmpty(t, nested)
		runs = append(runs, run, env.c.GetWorkflow(context.Background(), nested, ""))
	}

	for _, run := range runs {
		iter := env.c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		events := 0
		for iter.HasNext() {
			ev, err := iter.Next()
			require.NoError(t, err)
			raw, err := proto.Marshal(ev)
			require.NoError(t, err)
			events++
			for _, secret := range []string{fileSecret, envSecret} {
				assert.False(t, bytes.Contains(raw, []byte(secret)),
					"event %d (%s) of %s carries a secret", ev.GetEventId(), ev.GetEventType(), run.GetID())
			}
		}
		assert.Positive(t, events)
	}

	// The test can fail: the secret is in what the in-process children read.
	var found bool
	require.Eventually(t, func() bool {
		found = false
		_ = filepath.WalkDir(env.sessionRoot, func(path string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(fileSecret)) {
					found = true
				}
			}
			return nil
		})
		return found
	}, 10*time.Second, 100*time.Millisecond, "no session holds the file's secret: the children never read it")
}

// TestBatchPage: at the end of a batch its Current Details state the counts that `starter
// batch status --json` reports, and list the tasks that did not complete with links to their
// runs.
func TestBatchPage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok := script(t, dir, `{"text": "fine"}`)
	tasks := []workflows.Task{
		scriptedTask(subagent.ProviderSpawn, dir, ok, "one"),
		scriptedTask(subagent.ProviderSpawn, dir, ok, "two"),
		scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"error": "model exploded"}`), "fails"),
		scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "cut sh", "finish": "length"}`), "cut"),
		scriptedTask("no-such-provider", dir, ok, "unstartable"),
	}
	for i := range tasks {
		tasks[i].Label = fmt.Sprintf("task-%d", i)
	}
	run := startBatch(t, workflows.BatchInput{Tasks: tasks, Concurrency: 2})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var sum workflows.BatchSummary
	require.NoError(t, run.Get(ctx, &sum))

	code, stdout, stderr := runStarter(t, dir, "batch", "status", "--json", run.GetID())
	require.Equal(t, 0, code, stderr)
	var st workflows.BatchSummary
	require.NoError(t, json.Unmarshal([]byte(stdout), &st))
	require.Equal(t, 5, st.Done)

	page := currentDetails(t, run.GetID(), "")
	by := st.ByStopReason
	assert.Contains(t, page, "| pending | running | completed | aborted | error | max-tokens | refusal | failed |")
	assert.Contains(t, page, fmt.Sprintf("| %d | %d | %d | %d | %d | %d | %d | %d |", st.Queued, st.Running,
		by[subagent.StopCompleted], by[subagent.StopAborted], by[subagent.StopError], by[subagent.StopMaxTokens],
		by[subagent.StopRefusal], st.Failed), "the page's counts are the status's:\n%s", page)
	assert.Contains(t, page, fmt.Sprintf("· done · %d of %d tasks done", st.Done, st.Total))
	assert.Equal(t, 2, by[subagent.StopCompleted])
	assert.Equal(t, 1, by[subagent.StopError])
	assert.Equal(t, 1, by[subagent.StopMaxTokens])
	assert.Equal(t, 1, st.Failed, "the task whose run was rejected")

	require.Len(t, st.LastFailed, 3)
	for _, f := range st.LastFailed {
		why := string(f.StopReason)
		switch {
		case f.Error != "":
			assert.Equal(t, "task-4", f.Label)
			why = "failed: " + f.Error
		case f.StopReason == subagent.StopError:
			assert.Contains(t, f.EndMessage, "model exploded", "the page says why task %d ended error", f.Index)
			why += ": " + f.EndMessage
		default:
			assert.Empty(t, f.EndMessage, "task %d ended %s, not by an error", f.Index, f.StopReason)
		}
		assert.Contains(t, page, fmt.Sprintf("| %d | %s | %s | [%s](/namespaces/{namespace}/workflows/%s) |",
			f.Index, f.Label, strings.ReplaceAll(why, "|", `\|`), f.WorkflowID, f.WorkflowID))
	}

	results := readResults(t, env.c, run.GetID())
	require.Len(t, results, 5)
	assert.Contains(t, results[2].EndMessage, "model exploded", "the result line of the task that ended error says why")
	for _, i := range []int{0, 3, 4} {
		assert.Empty(t, results[i].EndMessage, "task %d: %+v", i, results[i])
	}
}
