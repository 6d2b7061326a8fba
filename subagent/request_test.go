package subagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

func TestRequestJSONUsesSpecNames(t *testing.T) {
	depth := int64(2)
	req := Request{
		Label:        "scan",
		Prompt:       []session.Block{session.Text("look")},
		Parent:       ParentRef{SessionID: "p1", Cwd: "/w"},
		AgentOptions: session.Route{Model: "m"},
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		MaxDepth:     &depth,
		ToolFilter:   &ToolFilter{Allow: []string{"read_file"}, Deny: []string{"write_file"}},
		Persona:      "terse",
	}
	raw, err := json.Marshal(req)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"label": "scan",
		"prompt": [{"type": "text", "text": "look"}],
		"parent": {"sessionId": "p1", "cwd": "/w"},
		"agentOptions": {"provider": "", "model": "m"},
		"outputSchema": {"type": "object"},
		"maxDepth": 2,
		"toolFilter": {"allow": ["read_file"], "deny": ["write_file"]},
		"persona": "terse"
	}`, string(raw))

	var back Request
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, req, back)
}

func TestRequestJSONOmitsAbsentOptions(t *testing.T) {
	raw, err := json.Marshal(Request{Prompt: []session.Block{session.Text("x")}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"prompt": [{"type": "text", "text": "x"}]}`, string(raw))
}

func TestHasOutputSchema(t *testing.T) {
	for in, want := range map[string]bool{"": false, "null": false, " null ": false, "{}": true} {
		assert.Equal(t, want, Request{OutputSchema: json.RawMessage(in)}.HasOutputSchema(), "%q", in)
	}
	var req Request
	require.NoError(t, json.Unmarshal([]byte(`{"outputSchema": null}`), &req))
	assert.False(t, req.HasOutputSchema())
}

func TestResultJSON(t *testing.T) {
	raw, err := json.Marshal(Result{StopReason: StopAborted})
	require.NoError(t, err)
	assert.JSONEq(t, `{"output": [], "stopReason": "aborted"}`, string(raw))

	raw, err = json.Marshal(Result{
		Output:     []session.Block{session.Text("hi")},
		Structured: json.RawMessage(`{"a":1}`),
		StopReason: StopCompleted,
	})
	require.NoError(t, err)
	assert.JSONEq(t, `{"output": [{"type":"text","text":"hi"}], "structured": {"a":1}, "stopReason": "completed"}`, string(raw))
}

func TestCapabilitiesJSON(t *testing.T) {
	raw, err := json.Marshal(Capabilities{OutputSchema: true, InheritsParentContext: true})
	require.NoError(t, err)
	assert.JSONEq(t, `{"outputSchema": true, "depthLimit": false, "toolFilter": false, "persona": false, "inheritsParentContext": true}`, string(raw))
}

// TestDelegationRequest: the tool, a batch line and `starter run` build their request here; a
// filter is sent only when allow or deny is given, because a non-nil empty filter would
// still ask the provider for the toolFilter capability.
func TestDelegationRequest(t *testing.T) {
	depth := int64(1)
	d := Delegation{Task: "look", Label: "scan", Persona: "terse", Route: session.Route{Model: "m"},
		MaxDepth: &depth, OutputSchema: json.RawMessage(`{"type":"object"}`)}
	parent := ParentRef{SessionID: "p1", Cwd: "/w"}
	req := d.Request(parent)
	assert.Equal(t, Request{
		Label: "scan", Prompt: []session.Block{session.Text("look")}, Parent: parent,
		AgentOptions: session.Route{Model: "m"}, OutputSchema: json.RawMessage(`{"type":"object"}`),
		MaxDepth: &depth, Persona: "terse",
	}, req)
	assert.Nil(t, req.ToolFilter)

	d.Deny = []string{"write_file"}
	assert.Equal(t, &ToolFilter{Deny: []string{"write_file"}}, d.Request(parent).ToolFilter)
}
