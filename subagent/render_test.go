package subagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

func TestToolError(t *testing.T) {
	assert.Equal(t, "Error: subagent maxDepth must be a non-negative safe integer",
		ToolError("subagent maxDepth must be a non-negative safe integer"))
}

func TestRenderResult(t *testing.T) {
	partial := []session.Block{session.Text("half "), session.Text("done")}
	const tail = "\nPartial output before the run ended:\nhalf done"
	tests := []struct {
		reason StopReason
		output []session.Block
		want   string
	}{
		{StopCompleted, partial, "half done"},
		{StopCompleted, nil, ""},
		{StopAborted, nil, "subagent run was cancelled"},
		{StopAborted, partial, "subagent run was cancelled" + tail},
		{StopError, nil, "subagent run failed"},
		{StopError, partial, "subagent run failed" + tail},
		{StopMaxTokens, nil, "subagent run hit its token limit before finishing"},
		{StopMaxTokens, partial, "subagent run hit its token limit before finishing" + tail},
		{StopRefusal, nil, "subagent declined the task"},
		{StopRefusal, partial, "subagent declined the task" + tail},
		{"exploded", nil, "subagent run ended abnormally (exploded)"},
		{"exploded", partial, "subagent run ended abnormally (exploded)" + tail},
		{StopError, []session.Block{session.Text("")}, "subagent run failed"},
	}
	for _, tt := range tests {
		t.Run(string(tt.reason), func(t *testing.T) {
			assert.Equal(t, tt.want, RenderResult(Result{Output: tt.output, StopReason: tt.reason}))
		})
	}
}

func TestDescriptorJSON(t *testing.T) {
	raw, err := json.Marshal(NewDescriptor("spawn", "scan"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 2, "mode": "one-shot", "provider": "spawn", "label": "scan"}`, string(raw))

	raw, err = json.Marshal(NewDescriptor("dsh-sdk", ""))
	require.NoError(t, err)
	assert.JSONEq(t, `{"version": 2, "mode": "one-shot", "provider": "dsh-sdk"}`, string(raw))
}
