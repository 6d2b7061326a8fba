package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoTool returns a tool that answers with its name and counts its calls in *calls (if non-nil).
func echoTool(name string, calls *int) Tool {
	return Tool{
		Name:        name,
		Description: "echo " + name,
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Handler: func(_ context.Context, _ Env, call Call) (Result, error) {
			if calls != nil {
				*calls++
			}
			return TextResult(name + " " + string(call.Input)), nil
		},
	}
}

func TestRegistryZeroValueRegistersAndLooksUp(t *testing.T) {
	var r Registry
	require.NoError(t, r.Register(echoTool("b", nil)))
	require.NoError(t, r.Register(echoTool("a", nil)))

	got, ok := r.Lookup("a")
	require.True(t, ok)
	assert.Equal(t, "a", got.Name)
	_, ok = r.Lookup("missing")
	assert.False(t, ok)
	assert.Equal(t, []string{"a", "b"}, r.Names())
}

func TestRegistryRejectsInvalidTools(t *testing.T) {
	var r Registry
	require.NoError(t, r.Register(echoTool("dup", nil)))

	noHandler := echoTool("nohandler", nil)
	noHandler.Handler = nil
	arrayParams := echoTool("array", nil)
	arrayParams.Parameters = json.RawMessage(`[]`)
	noParams := echoTool("noparams", nil)
	noParams.Parameters = nil
	brokenParams := echoTool("broken", nil)
	brokenParams.Parameters = json.RawMessage(`{"type":`)

	for _, tc := range []struct {
		tool Tool
		want string
	}{
		{echoTool("dup", nil), `tools: register "dup": a global tool with this name is already registered`},
		{echoTool("", nil), `tools: register: tool name is empty`},
		{echoTool("has space", nil), `tools: register "has space": tool name must be 1-64 letters, digits, '_' or '-'`},
		{noHandler, `tools: register "nohandler": handler is nil`},
		{arrayParams, `tools: register "array": parameters must be a JSON schema object, got "[]"`},
		{noParams, `tools: register "noparams": parameters must be a JSON schema object, got ""`},
		{brokenParams, `tools: register "broken": parameters must be a JSON schema object`},
	} {
		err := r.Register(tc.tool)
		require.Error(t, err, tc.tool.Name)
		assert.Contains(t, err.Error(), tc.want)
	}
	assert.Equal(t, []string{"dup"}, r.Names())
}

func TestRegistryKeepsItsOwnCopyOfParameters(t *testing.T) {
	var r Registry
	tool := echoTool("a", nil)
	params := []byte(`{"type":"object"}`)
	tool.Parameters = params
	require.NoError(t, r.Register(tool))
	copy(params, `{"type":"string"}`)

	got, _ := r.Lookup("a")
	assert.JSONEq(t, `{"type":"object"}`, string(got.Parameters))
}
