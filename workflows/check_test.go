package workflows

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/subagent"
)

// TestBatchRejectsBadInputBeforeStartingAnything: a Batch input, as a caller in another
// language sends it, with a concurrency given as 0 or below or two tasks of one id fails the
// batch at once with its rule, and starts no child.
func TestBatchRejectsBadInputBeforeStartingAnything(t *testing.T) {
	for _, tc := range []struct {
		name, json, rule, msg string
	}{
		{"concurrency 0", `{"total": 1, "tasks": [{"task": "a"}], "concurrency": 0}`, RuleInvalidConcurrency,
			"batch concurrency must be at least 1 (leave it out for 10): 0"},
		{"concurrency -3", `{"total": 1, "tasks": [{"task": "a"}], "concurrency": -3}`, RuleInvalidConcurrency,
			"batch concurrency must be at least 1 (leave it out for 10): -3"},
		{"duplicate task ids", `{"total": 3, "tasks": [{"task": "a", "id": "x"}, {"task": "b"}, {"task": "c", "id": "x"}]}`, RuleDuplicateTaskID,
			`batch tasks 0 and 2 have the same id "x": each task's id names its own run`},
		{"a batch id over the server's limit", `{"total": 1, "tasks": [{"task": "a"}], "batchId": "` + strings.Repeat("b", 3000) + `"}`, RuleInvalidAttribute,
			"subagent batch is 3002 bytes encoded, over the server's limit of 2048 bytes for a search attribute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in BatchInput
			require.NoError(t, json.Unmarshal([]byte(tc.json), &in))
			assert.Equal(t, &subagent.ValidationError{Rule: tc.rule, Message: tc.msg}, CheckBatchInput(in))
			// The workflow, as the worker runs it: it fails before it starts any child.
			var f batchFakes
			env := newBatchEnv(t, &f)
			env.ExecuteWorkflow(Batch, in)
			require.True(t, env.IsWorkflowCompleted())
			ve := Rejection(env.GetWorkflowError())
			require.NotNil(t, ve, "%v", env.GetWorkflowError())
			assert.Equal(t, &subagent.ValidationError{Rule: tc.rule, Message: tc.msg}, ve)
			assert.Empty(t, f.children, "no child started")
		})
	}
	var in BatchInput
	require.NoError(t, json.Unmarshal([]byte(`{"total": 1, "tasks": [{"task": "a"}]}`), &in))
	assert.NoError(t, CheckBatchInput(in), "a concurrency left out is the default")
}
