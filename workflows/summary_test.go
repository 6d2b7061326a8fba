package workflows

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

func TestSummary(t *testing.T) {
	in := spawnInput()
	assert.Equal(t, "spawn child of parent-1: summarise", Summary(in))

	in.Request.Label = ""
	in.Request.Prompt = []session.Block{session.Text("  look at\nthe " + strings.Repeat("x", 80))}
	assert.Equal(t, "spawn child of parent-1: look at the "+strings.Repeat("x", 48)+"…", Summary(in),
		"the prompt stands in for the label, on one line, cut")

	in.Request.Parent = subagent.ParentRef{}
	in.Request.Prompt = nil
	assert.Equal(t, "spawn child of a new root session", Summary(in))
}

func TestDetailsNameTheRequestedOptions(t *testing.T) {
	in := spawnInput()
	in.Request.MaxDepth = ptr(int64(2))
	in.Request.ToolFilter = &subagent.ToolFilter{Deny: []string{"shell"}}
	d := Details(in)
	for _, want := range []string{"**provider**: spawn", "**parent**: parent-1", "**model**: model-a",
		"**maxDepth**: 2", "**tools denied**: shell", "**batch**: batch-7", "summarise the repo"} {
		assert.Contains(t, d, want)
	}
	assert.NotContains(t, d, "tools allowed")
}

func TestCheckStart(t *testing.T) {
	req := spawnInput().Request
	req.OutputSchema = []byte(`{"type": "object"}`)
	req.Persona = "terse"
	require.NoError(t, subagent.CheckStart(subagent.ProviderSpawn, req))
	require.NoError(t, subagent.CheckStart(subagent.ProviderFork, req))
	require.EqualError(t, subagent.CheckStart(subagent.ProviderSDK, req),
		`subagent provider "sdk" does not support the "outputSchema" capability`)
	require.NoError(t, subagent.CheckStart(subagent.ProviderSDK, spawnInput().Request))
}

func TestToApplicationError(t *testing.T) {
	err := ToApplicationError(fmt.Errorf("publish: %w", &subagent.DepthError{Attempted: 2, Max: 1}))
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, "subagent depth 2 exceeds maxDepth 1", appErr.Message())
	assert.Equal(t, subagent.RuleDepthExceeded, appErr.Type())
	assert.True(t, appErr.NonRetryable())

	plain := errors.New("disk full")
	assert.Same(t, plain, ToApplicationError(plain), "other errors pass unchanged")
}

func TestRejection(t *testing.T) {
	const msg = `no subagent provider registered for "x"`
	rejected := temporal.NewNonRetryableApplicationError(msg, subagent.RuleUnknownProvider, nil)
	wrapped := fmt.Errorf("workflow failed: %w", rejected)
	for _, err := range []error{rejected, wrapped} {
		ve := Rejection(err)
		require.NotNil(t, ve)
		assert.Equal(t, &subagent.ValidationError{Rule: subagent.RuleUnknownProvider, Message: msg}, ve)
	}
	assert.Nil(t, Rejection(temporal.NewApplicationError("io", "PathError")), "not a rule")
	assert.Nil(t, Rejection(temporal.NewCanceledError()))
	assert.Nil(t, Rejection(nil))
}

func TestSearchAttributesFitSQLVisibility(t *testing.T) {
	count := map[enumspb.IndexedValueType]int{}
	names := map[string]bool{}
	for _, k := range SearchAttributes {
		count[k.GetValueType()]++
		names[k.GetName()] = true
	}
	assert.Len(t, names, 11)
	assert.LessOrEqual(t, count[enumspb.INDEXED_VALUE_TYPE_KEYWORD], 10)
	assert.LessOrEqual(t, count[enumspb.INDEXED_VALUE_TYPE_INT], 3)
	assert.LessOrEqual(t, count[enumspb.INDEXED_VALUE_TYPE_TEXT], 3)
}
