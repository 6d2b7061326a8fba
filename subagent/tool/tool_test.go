package tool

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

var testCaps = map[string]subagent.Capabilities{
	"spawn": {OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true},
	"sdk":   {},
}

// recorder is a Delegate that records its calls and answers with res, err.
type recorder struct {
	calls []DelegateCall
	res   subagent.Result
	err   error
}

func (r *recorder) delegate(_ context.Context, call DelegateCall) (subagent.Result, error) {
	r.calls = append(r.calls, call)
	return r.res, r.err
}

// newToolScope returns a scope holding the subagent tool built from opts (subagent.Capabilities and
// Delegate filled in when nil) and the recorder behind it.
func newToolScope(t *testing.T, opts Options) (*tools.Scope, *recorder) {
	t.Helper()
	rec := &recorder{res: subagent.Result{Output: []session.Block{session.Text("done")}, StopReason: subagent.StopCompleted}}
	if opts.DefaultProvider == "" {
		opts.DefaultProvider = "spawn"
	}
	opts.Capabilities = func(p string) (subagent.Capabilities, bool) { c, ok := testCaps[p]; return c, ok }
	opts.Delegate = rec.delegate
	tool, err := New(opts)
	require.NoError(t, err)
	scope := tools.NewScope(nil)
	_, err = scope.Register(tool)
	require.NoError(t, err)
	return scope, rec
}

var callerEnv = tools.Env{SessionID: "parent-1", Cwd: "/work/dir"}

func call(input string) tools.Call {
	return tools.Call{ID: "call-7", Name: Name, Input: json.RawMessage(input)}
}

func text(r tools.Result) string { return session.JoinText(r.Content) }

func TestToolDefinition(t *testing.T) {
	scope, _ := newToolScope(t, Options{})
	visible := scope.Visible()
	require.Len(t, visible, 1)
	tool := visible[0]
	assert.Equal(t, "subagent", tool.Name)
	assert.NotEmpty(t, tool.Description)

	var schema struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(tool.Parameters, &schema))
	assert.Equal(t, "object", schema.Type)
	assert.Equal(t, []string{"task"}, schema.Required)
	for _, name := range []string{"task", "label", "provider", "model", "modelProvider", "maxTokens",
		"maxDepth", "outputSchema", "persona", "allow", "deny"} {
		assert.Contains(t, schema.Properties, name)
	}
}

func TestToolBuildsTheRequest(t *testing.T) {
	scope, rec := newToolScope(t, Options{})
	res := scope.Execute(context.Background(), callerEnv, call(`{
		"task": "count the files", "label": "count", "model": "m.json", "modelProvider": "scripted",
		"maxTokens": 100, "outputSchema": {"type": "object"}, "persona": "terse",
		"allow": ["list_dir"], "deny": ["write_file"]}`))
	require.False(t, res.IsError, text(res))
	assert.Equal(t, "done", text(res))

	require.Len(t, rec.calls, 1)
	got := rec.calls[0]
	assert.Equal(t, "call-7", got.CallID)
	assert.Equal(t, "spawn", got.Provider)
	req := got.Request
	assert.Equal(t, "count", req.Label)
	assert.Equal(t, []session.Block{session.Text("count the files")}, req.Prompt)
	assert.Equal(t, subagent.ParentRef{SessionID: "parent-1", Cwd: "/work/dir"}, req.Parent)
	assert.Equal(t, session.Route{Provider: "scripted", Model: "m.json", MaxTokens: 100}, req.AgentOptions)
	assert.JSONEq(t, `{"type": "object"}`, string(req.OutputSchema))
	assert.Equal(t, new(int64(subagent.DefaultMaxDepth)), req.MaxDepth)
	assert.Equal(t, "terse", req.Persona)
	assert.Equal(t, &subagent.ToolFilter{Allow: []string{"list_dir"}, Deny: []string{"write_file"}}, req.ToolFilter)
}

func TestToolMinimalRequest(t *testing.T) {
	scope, rec := newToolScope(t, Options{})
	res := scope.Execute(context.Background(), callerEnv, call(`{"task": "t"}`))
	require.False(t, res.IsError, text(res))
	req := rec.calls[0].Request
	assert.Nil(t, req.ToolFilter)
	assert.False(t, req.HasOutputSchema())
	assert.True(t, req.AgentOptions.IsZero(), "the child inherits the caller's route")
}

func TestToolInvalidArguments(t *testing.T) {
	scope, rec := newToolScope(t, Options{})
	for _, input := range []string{`{}`, `{"task": ""}`, `{"task": "t", "bogus": 1}`, `{"task": 3}`, `{"task": "t", "maxTokens": -1}`} {
		res := scope.Execute(context.Background(), callerEnv, call(input))
		assert.True(t, res.IsError, input)
		assert.Contains(t, text(res), "Error: invalid arguments: subagent", input)
	}
	assert.Empty(t, rec.calls, "invalid calls delegate nothing")
}

func TestToolMaxDepthModes(t *testing.T) {
	two, err := subagent.MaxDepthLimit(2)
	require.NoError(t, err)
	zero, err := subagent.MaxDepthLimit(0)
	require.NoError(t, err)

	tests := []struct {
		name    string
		setting subagent.MaxDepthSetting
		input   string
		want    *int64
	}{
		{"default cap", subagent.MaxDepthSetting{}, `{"task": "t"}`, new(int64(3))},
		{"configured cap", two, `{"task": "t"}`, new(int64(2))},
		{"a call lowers the cap", two, `{"task": "t", "maxDepth": 1}`, new(int64(1))},
		{"a call cannot raise the cap", two, `{"task": "t", "maxDepth": 9}`, new(int64(2))},
		{"provider-managed sends none", subagent.ProviderManagedDepth(), `{"task": "t"}`, nil},
		{"provider-managed sends the call's cap", subagent.ProviderManagedDepth(), `{"task": "t", "maxDepth": 4}`, new(int64(4))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scope, rec := newToolScope(t, Options{MaxDepth: tt.setting})
			res := scope.Execute(context.Background(), callerEnv, call(tt.input))
			require.False(t, res.IsError, text(res))
			assert.Equal(t, tt.want, rec.calls[0].Request.MaxDepth)
		})
	}

	t.Run("zero forbids delegation", func(t *testing.T) {
		scope, rec := newToolScope(t, Options{MaxDepth: zero})
		res := scope.Execute(context.Background(), callerEnv, call(`{"task": "t"}`))
		assert.True(t, res.IsError)
		assert.Equal(t, "Error: subagent delegation is disabled here (maxDepth 0)", text(res))
		assert.Empty(t, rec.calls)
	})

	t.Run("a numeric cap for a provider without depthLimit", func(t *testing.T) {
		scope, rec := newToolScope(t, Options{})
		res := scope.Execute(context.Background(), callerEnv, call(`{"task": "t", "provider": "sdk"}`))
		assert.True(t, res.IsError)
		assert.Equal(t, `Error: subagent provider "sdk" does not support the "depthLimit" capability: set maxDepth to "provider-managed"`, text(res))
		assert.Empty(t, rec.calls)
	})

	t.Run("provider-managed for a provider without depthLimit", func(t *testing.T) {
		scope, rec := newToolScope(t, Options{DefaultProvider: "sdk", MaxDepth: subagent.ProviderManagedDepth()})
		res := scope.Execute(context.Background(), callerEnv, call(`{"task": "t"}`))
		require.False(t, res.IsError, text(res))
		assert.Equal(t, "sdk", rec.calls[0].Provider)
		assert.Nil(t, rec.calls[0].Request.MaxDepth)
	})

	t.Run("an unknown provider is left to Delegate", func(t *testing.T) {
		scope, rec := newToolScope(t, Options{})
		scope.Execute(context.Background(), callerEnv, call(`{"task": "t", "provider": "nope"}`))
		require.Len(t, rec.calls, 1)
		assert.Equal(t, "nope", rec.calls[0].Provider)
	})
}

func TestNewToolRejectsConfiguration(t *testing.T) {
	caps := func(p string) (subagent.Capabilities, bool) { c, ok := testCaps[p]; return c, ok }
	delegate := (&recorder{}).delegate

	_, err := New(Options{DefaultProvider: "sdk", Capabilities: caps, Delegate: delegate})
	var ve *subagent.ValidationError
	require.ErrorAs(t, err, &ve, "a numeric cap (the default) for sdk")
	assert.Equal(t, subagent.RuleDepthLimitUnsupported, ve.Rule)
	assert.Contains(t, err.Error(), `"provider-managed"`)

	_, err = New(Options{DefaultProvider: "nope", Capabilities: caps, Delegate: delegate})
	assert.EqualError(t, err, `subagent: new tool: no subagent provider registered for "nope"`)

	_, err = New(Options{DefaultProvider: "spawn", Capabilities: caps})
	assert.Error(t, err, "Delegate is required")
}

func TestToolRendersResults(t *testing.T) {
	partial := []session.Block{session.Text("half "), session.Text("done")}
	tests := []struct {
		name    string
		res     subagent.Result
		want    string
		isError bool
	}{
		{"completed", subagent.Result{Output: partial, StopReason: subagent.StopCompleted}, "half done", false},
		{"completed with structured output", subagent.Result{Output: partial, Structured: json.RawMessage(`{"n": 1}`), StopReason: subagent.StopCompleted},
			"half done\n\nStructured result:\n{\"n\": 1}", false},
		{"structured only", subagent.Result{Structured: json.RawMessage(`{"n": 1}`), StopReason: subagent.StopCompleted},
			"Structured result:\n{\"n\": 1}", false},
		{"aborted", subagent.Result{StopReason: subagent.StopAborted}, "subagent run was cancelled", true},
		{"aborted with partial output", subagent.Result{Output: partial, StopReason: subagent.StopAborted},
			"subagent run was cancelled\nPartial output before the run ended:\nhalf done", true},
		{"error", subagent.Result{StopReason: subagent.StopError}, "subagent run failed", true},
		{"max-tokens with partial output", subagent.Result{Output: partial, StopReason: subagent.StopMaxTokens},
			"subagent run hit its token limit before finishing\nPartial output before the run ended:\nhalf done", true},
		{"refusal", subagent.Result{StopReason: subagent.StopRefusal}, "subagent declined the task", true},
		{"other", subagent.Result{StopReason: "weird"}, "subagent run ended abnormally (weird)", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scope, rec := newToolScope(t, Options{})
			rec.res = tt.res
			res := scope.Execute(context.Background(), callerEnv, call(`{"task": "t"}`))
			assert.Equal(t, tt.want, text(res))
			assert.Equal(t, tt.isError, res.IsError)
		})
	}
}

func TestToolRendersDelegateErrors(t *testing.T) {
	scope, rec := newToolScope(t, Options{})
	rec.err = &subagent.DepthError{Attempted: 3, Max: 2}
	res := scope.Execute(context.Background(), callerEnv, call(`{"task": "t"}`))
	assert.True(t, res.IsError)
	assert.Equal(t, "Error: subagent depth 3 exceeds maxDepth 2", text(res))

	rec.err = errors.New("workflows: start subagent-x: connection refused")
	res = scope.Execute(context.Background(), callerEnv, call(`{"task": "t"}`))
	assert.Equal(t, "Error: workflows: start subagent-x: connection refused", text(res))
}
