package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

func parseRun(t *testing.T, args ...string) (subflow.StartOptions, error) {
	t.Helper()
	fs := flag.NewFlagSet("starter run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f runFlags
	f.register(fs)
	positional, err := parseInterleaved(fs, args)
	require.NoError(t, err)
	return f.startOptions(joinTask(positional))
}

func joinTask(words []string) string {
	var b bytes.Buffer
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

func TestRunDefaultsCreateARootSession(t *testing.T) {
	opts, err := parseRun(t, "summarize", "the", "repo")
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	in := opts.Input
	assert.Equal(t, subagent.ProviderSpawn, in.Provider)
	assert.Equal(t, workflows.TaskQueue, opts.TaskQueue)
	assert.Empty(t, opts.WorkflowID, "Start names it subagent-<childId>")
	assert.Equal(t, "summarize the repo", session.JoinText(in.Request.Prompt))
	want := session.Route{Provider: "deepseek-official", Model: "deepseek-v4-flash"}
	require.NotNil(t, in.Root)
	assert.Equal(t, workflows.RootSession{Cwd: wd, Route: want}, *in.Root)
	assert.Equal(t, session.Route{}, in.Request.AgentOptions, "a root run's route is stored once, in Root")
	assert.Equal(t, subagent.ParentRef{}, in.Request.Parent, "a root run's cwd is stored once, in Root")
	assert.Equal(t, wd, in.Cwd())
	assert.Equal(t, want, in.Route())
	assert.Nil(t, in.Request.MaxDepth)
	assert.Nil(t, in.Request.ToolFilter)
	assert.Equal(t, workflows.RunPriority, opts.Priority.PriorityKey, "a run goes ahead of batch tasks")
}

func TestRunFlagsFillTheRequest(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "schema.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type":"object"}`), 0o644))
	opts, err := parseRun(t, "--provider", "fork", "--parent", "p-1", "--model", "m", "--max-tokens", "99",
		"--schema", schema, "--max-depth", "2", "--persona", "terse", "--allow", "read_file", "--allow", "grep",
		"--deny", "write_file", "--label", "lbl", "--id", "wf-1", "--task-queue", "q", "--priority", "1", "task", "--json")
	require.NoError(t, err)
	in := opts.Input
	assert.Equal(t, "wf-1", opts.WorkflowID)
	assert.Equal(t, "q", opts.TaskQueue)
	assert.Equal(t, 1, opts.Priority.PriorityKey)
	assert.Equal(t, "fork", in.Provider)
	assert.Nil(t, in.Root, "a run with a parent creates no root session")
	assert.Equal(t, subagent.ParentRef{SessionID: "p-1"}, in.Request.Parent)
	assert.Equal(t, session.Route{Model: "m", MaxTokens: 99}, in.Request.AgentOptions, "only the flags given override the parent's route")
	assert.JSONEq(t, `{"type":"object"}`, string(in.Request.OutputSchema))
	require.NotNil(t, in.Request.MaxDepth)
	assert.EqualValues(t, 2, *in.Request.MaxDepth)
	assert.Equal(t, "terse", in.Request.Persona)
	assert.Equal(t, &subagent.ToolFilter{Allow: []string{"read_file", "grep"}, Deny: []string{"write_file"}}, in.Request.ToolFilter)
	assert.Equal(t, "lbl", in.Request.Label)
}

func TestRunRefusesOutOfRangeMaxDepthBeforeStarting(t *testing.T) {
	// The workflow's own check, made up front: nothing starts (docs/cli.md).
	_, err := parseRun(t, "--max-depth", "-1", "x")
	require.EqualError(t, err, "starter run: --max-depth -1: subagent maxDepth must be a non-negative safe integer")
}

func TestRunUsageErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no task":             {"--json"},
		"scripted, no script": {"--model-provider", "scripted", "x"},
		"max-depth not int":   {"--max-depth", "two", "x"},
		"schema missing":      {"--schema", filepath.Join(t.TempDir(), "nope.json"), "x"},
		"detach and follow":   {"--detach", "--follow", "x"},
		"negative max-tokens": {"--max-tokens", "-3", "x"},
		"priority 6":          {"--priority", "6", "x"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseRun(t, args...)
			var ue *usageError
			require.ErrorAs(t, err, &ue)
		})
	}
}

func TestDispatchBadUsageExits2(t *testing.T) {
	var stderr bytes.Buffer
	assert.Equal(t, exitUsage, dispatch(t.Context(), nil, io.Discard, &stderr))
	assert.Equal(t, exitUsage, dispatch(t.Context(), []string{"frobnicate"}, io.Discard, &stderr))
	assert.Equal(t, exitUsage, dispatch(t.Context(), []string{"run", "--no-such-flag", "x"}, io.Discard, &stderr))
	assert.Equal(t, exitUsage, dispatch(t.Context(), []string{"status"}, io.Discard, &stderr))
	assert.Equal(t, exitUsage, dispatch(t.Context(), []string{"run", "--model-provider", "scripted", "x"}, io.Discard, &stderr))
}

func TestExitCodes(t *testing.T) {
	assert.Equal(t, 0, exitCode(subagent.StopCompleted))
	assert.Equal(t, 3, exitCode(subagent.StopAborted))
	assert.Equal(t, 4, exitCode(subagent.StopMaxTokens))
	assert.Equal(t, 5, exitCode(subagent.StopRefusal))
	assert.Equal(t, 1, exitCode(subagent.StopError))
	assert.Equal(t, 1, exitCode("something-new"))
}

func TestOutcomeOfCanceledRunIsItsDetails(t *testing.T) {
	partial := workflows.Outcome{ChildID: "c", Depth: 1, Result: subagent.Result{
		Output: []session.Block{session.Text("half")}, StopReason: subagent.StopAborted}}
	out, err := outcomeOf(temporal.NewCanceledError(partial))
	require.NoError(t, err)
	assert.Equal(t, partial, out)

	out, err = outcomeOf(temporal.NewCanceledError())
	require.NoError(t, err)
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason, "cancelled before publication")

	_, err = outcomeOf(temporal.NewNonRetryableApplicationError("subagent depth 2 exceeds maxDepth 1", subagent.RuleDepthExceeded, nil))
	var ve *subagent.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "subagent depth 2 exceeds maxDepth 1", ve.Message)

	boom := errors.New("boom")
	_, err = outcomeOf(boom)
	assert.ErrorIs(t, err, boom)
}

func TestReportJSON(t *testing.T) {
	var stdout bytes.Buffer
	res := newResultJSON("wf", "run", workflows.Outcome{ChildID: "c", Depth: 1, Result: subagent.Result{
		Output: []session.Block{session.Text("a <b>")}, Structured: json.RawMessage(`{"n":1}`), StopReason: subagent.StopMaxTokens}})
	assert.Equal(t, exitMaxTokens, report(&stdout, io.Discard, res, true))
	assert.JSONEq(t, `{"workflowId":"wf","runId":"run","childId":"c","depth":1,"stopReason":"max-tokens","output":"a <b>","structured":{"n":1}}`, stdout.String())

	stdout.Reset()
	res = newResultJSON("wf", "run", workflows.Outcome{Result: subagent.Result{StopReason: subagent.StopCompleted}})
	assert.Equal(t, exitCompleted, report(&stdout, io.Discard, res, true))
	assert.Contains(t, stdout.String(), `"structured":null`)
}

func TestTailFollowerPrintsOnlyWhatIsNew(t *testing.T) {
	var out bytes.Buffer
	f := &tailFollower{w: &out}
	f.update("Hel")
	f.update("Hello")
	f.update("Hello")
	f.update("llo, wor") // the window slid
	f.update("ld!")      // no overlap: more than a window streamed
	assert.Equal(t, "Hello, world!", out.String())
}

// TestRunSchemaWithABOM: a schema file saved with a UTF-8 byte order mark is accepted, and
// the request carries the schema without it.
func TestRunSchemaWithABOM(t *testing.T) {
	schema := filepath.Join(t.TempDir(), "schema.json")
	require.NoError(t, os.WriteFile(schema, []byte("\ufeff"+`{"type":"object"}`), 0o644))
	opts, err := parseRun(t, "--schema", schema, "x")
	require.NoError(t, err)
	assert.Equal(t, `{"type":"object"}`, string(opts.Input.Request.OutputSchema))
}

// TestRunRefusesARequestOverOnePayload: a request Temporal could not carry is refused with
// its size before anything starts.
func TestRunRefusesARequestOverOnePayload(t *testing.T) {
	_, err := parseRun(t, "--persona", string(bytes.Repeat([]byte("p"), workflows.MaxStartInputBytes)), "x")
	var ue *usageError
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "over the 2031616 bytes one Temporal payload can carry")
}

func TestDeploymentAndVersionUsage(t *testing.T) {
	ctx := context.Background()
	var out, errOut strings.Builder
	assert.Equal(t, exitUsage, dispatch(ctx, []string{"deployment"}, &out, &errOut))
	assert.Equal(t, exitUsage, dispatch(ctx, []string{"deployment", "set-current", "subflow"}, &out, &errOut), "no build id")
	assert.Equal(t, exitUsage, dispatch(ctx, []string{"deployment", "ramp", "subflow", "b2", "150"}, &out, &errOut))
	assert.Contains(t, errOut.String(), `PERCENT must be a number from 0 to 100: "150"`)

	assert.Equal(t, exitCompleted, dispatch(ctx, []string{"version"}, &out, &errOut))
	assert.Contains(t, out.String(), "module    github.com/subflow-dev/subflow")
	assert.Contains(t, out.String(), "build id  ")
	assert.Contains(t, out.String(), "revision  ")
}
