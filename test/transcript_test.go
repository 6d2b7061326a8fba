package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// transcriptOf runs `starter transcript` with args and decodes its --json output.
func transcriptOf(t *testing.T, dir string, args ...string) subagent.Transcript {
	t.Helper()
	code, stdout, stderr := runStarter(t, dir, append([]string{"transcript", "--json"}, args...)...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var tr subagent.Transcript
	require.NoError(t, json.Unmarshal([]byte(stdout), &tr))
	return tr
}

// kinds returns the transcript's entries as "kind tool text" lines, for comparison.
func kinds(tr subagent.Transcript) []string {
	var out []string
	for _, e := range tr.Entries {
		line := e.Kind
		switch e.Kind {
		case subagent.EntryPrompt, subagent.EntryText:
			line += " " + e.Text
		case subagent.EntryToolCall:
			line += " " + e.Tool + " " + e.Input
		case subagent.EntryToolResult:
			line += " " + e.Tool
			if e.IsError {
				line += " error"
			}
		case subagent.EntryTurnEnd:
			line += " " + e.End
		}
		out = append(out, line)
	}
	return out
}

// TestTranscript: `starter transcript` prints a child's turn in order, for an in-process run
// (read through a worker, the starter's own store not holding it) and an sdk run (what its
// runtime reported), cut at its bound unless --full; by batch id and label; and a removed
// session says so, with the date its run closed.
func TestTranscript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := strings.Repeat("0123456789", 500)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o644))
	steps := script(t, dir,
		toolCalls([2]string{"read_file", `{"path": "big.txt"}`}, [2]string{"read_file", `{"path": "missing.txt"}`}),
		`{"text": "read both"}`)
	want := []string{
		"prompt read the files",
		"step",
		"text ",
		`tool-call read_file {"path":"big.txt"}`,
		`tool-call read_file {"path":"missing.txt"}`,
		"tool-result read_file",
		"tool-result read_file error",
		"step",
		"text read both",
		"turn-end completed",
	}

	t.Run("in-process, through a worker", func(t *testing.T) {
		_, run := start(t, rootInput(subagent.ProviderSpawn, dir, steps, "read the files"))
		out, _ := outcome(t, run)
		// A store that does not hold the session, as on a host of its own: the worker reads it.
		elsewhere := t.TempDir()
		tr := transcriptOf(t, dir, "--session-root", elsewhere, run.GetID())
		assert.Equal(t, want, kinds(tr))
		assert.Equal(t, out.Usage.InputTokens, tr.InputTokens)
		assert.Equal(t, out.Usage.OutputTokens, tr.OutputTokens)
		result := tr.Entries[5]
		assert.Equal(t, subagent.DefaultTranscriptCut, tr.Cut)
		assert.Equal(t, big[:subagent.DefaultTranscriptCut]+"…", result.Text, "cut at the bound")
		assert.Equal(t, len(big)-subagent.DefaultTranscriptCut, result.CutBytes)

		full := transcriptOf(t, dir, "--full", run.GetID())
		assert.Equal(t, big, full.Entries[5].Text)
		assert.Zero(t, full.Cut)

		// The same from the store itself, and as text.
		local := transcriptOf(t, dir, "--session-root", env.sessionRoot, run.GetID())
		assert.Equal(t, tr, local)
		code, stdout, stderr := runStarter(t, dir, "transcript", run.GetID())
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "[prompt]\nread the files\n")
		assert.Contains(t, stdout, `→ read_file {"path":"missing.txt"}`)
		assert.Contains(t, stdout, "← read_file ok: 0123456789")
		assert.Contains(t, stdout, "[3000 bytes cut]")
		assert.Contains(t, stdout, "← read_file error: ")
		assert.Contains(t, stdout, "assistant: read both\n")
		assert.Contains(t, stdout, "[turn end] completed\n")
		assert.Contains(t, stdout, "stop      completed\n")
	})

	t.Run("bigger than a payload, by reference", func(t *testing.T) {
		// Two whole reads of 200 kB: over workflows.PayloadThreshold, so the worker stores the
		// transcript and the starter fetches it with FetchPayload.
		line := strings.Repeat("x", 99) + "\n"
		large := strings.Repeat(line, 2000)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "large.txt"), []byte(large), 0o644))
		read := [2]string{"read_file", `{"path": "large.txt"}`}
		_, run := start(t, rootInput(subagent.ProviderSpawn, dir, script(t, dir, toolCalls(read, read), `{"text": "big"}`), "read twice"))
		outcome(t, run)
		tr := transcriptOf(t, dir, "--full", run.GetID())
		var results []string
		for _, e := range tr.Entries {
			if e.Kind == subagent.EntryToolResult {
				results = append(results, e.Text)
			}
		}
		require.Len(t, results, 2)
		for _, r := range results {
			assert.True(t, strings.HasPrefix(r, large), "a whole result (%d bytes)", len(r))
		}
	})

	t.Run("sdk", func(t *testing.T) {
		_, run := start(t, rootInput(subagent.ProviderSDK, dir, steps, "read the files"))
		out, _ := outcome(t, run)
		tr := transcriptOf(t, dir, run.GetID())
		assert.Equal(t, want, kinds(tr))
		assert.Equal(t, out.Usage.OutputTokens, tr.OutputTokens)
		assert.True(t, strings.HasPrefix(tr.Entries[5].Text, "0123456789"))
	})

	t.Run("batch task by label", func(t *testing.T) {
		tasks := []workflows.Task{
			scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "first answer"}`), "first"),
			scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "second answer"}`), "second"),
		}
		tasks[0].Label, tasks[1].Label = "alpha one", "beta two"
		run := startBatch(t, workflows.BatchInput{Tasks: tasks, Concurrency: 2})
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		var sum workflows.BatchSummary
		require.NoError(t, run.Get(ctx, &sum))
		var tr subagent.Transcript
		require.Eventually(t, func() bool { // visibility lists the runs a moment later
			code, stdout, _ := runStarter(t, dir, "transcript", "--json", "--label", "beta two", run.GetID())
			return code == 0 && json.Unmarshal([]byte(stdout), &tr) == nil
		}, waitLimit, 200*time.Millisecond)
		assert.Equal(t, []string{"prompt second", "step", "text second answer", "turn-end completed"}, kinds(tr))
		byIndex := transcriptOf(t, dir, "--task", "0", run.GetID())
		assert.Equal(t, []string{"prompt first", "step", "text first answer", "turn-end completed"}, kinds(byIndex))
		code, _, stderr := runStarter(t, dir, "transcript", "--label", "gamma", run.GetID())
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, `has no run of the task labelled "gamma"`)
	})

	t.Run("batch task with its own id beside a poser", func(t *testing.T) {
		task := scriptedTask(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "own answer"}`), "own")
		task.ID = "own-" + uuid.NewString()
		run := startBatch(t, workflows.BatchInput{Tasks: []workflows.Task{task}})
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		require.NoError(t, run.Get(ctx, nil))
		startPoser(t, run.GetID(), 0, 2)
		tr := transcriptOf(t, dir, "--task", "0", run.GetID())
		assert.Equal(t, []string{"prompt own", "step", "text own answer", "turn-end completed"}, kinds(tr))
	})

	t.Run("removed session", func(t *testing.T) {
		pub, run := start(t, rootInput(subagent.ProviderSpawn, dir, script(t, dir, `{"text": "gone soon"}`), "answer"))
		outcome(t, run)
		require.NoError(t, openFileStore(t, env.sessionRoot).Remove(context.Background(), pub.ChildID))
		desc, err := env.c.DescribeWorkflowExecution(context.Background(), run.GetID(), "")
		require.NoError(t, err)
		closed := desc.GetWorkflowExecutionInfo().GetCloseTime().AsTime().UTC().Format(time.RFC3339)
		code, stdout, stderr := runStarter(t, dir, "transcript", run.GetID())
		assert.Equal(t, 1, code)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, "session "+pub.ChildID+" was removed from the session store: the run closed on "+closed)
	})
}
