package inprocess

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

// whoamiTool is a run tool answering with the calling session id; it hands the live agent
// of that session to seen, so a test can look at the agent's scope after the run.
func whoamiTool(h *Host, seen chan<- *agent.Agent) tools.Tool {
	return tools.Tool{
		Name:        "whoami",
		Description: "Say which session calls.",
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Handler: func(_ context.Context, env tools.Env, _ tools.Call) (tools.Result, error) {
			if a, ok := h.Agent(env.SessionID); ok && seen != nil {
				seen <- a
			}
			return tools.TextResult("you are " + env.SessionID), nil
		},
	}
}

func TestDriveInstallsRunToolsForTheDriveOnly(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"toolCalls": [{"name": "whoami", "input": {}}]}`, `{"text": "done"}`)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "who am I?")
	h := f.hostWith(t, f.recorder)
	created, err := h.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.NoError(t, err)

	seen := make(chan *agent.Agent, 1)
	_, err = h.Drive(context.Background(), DriveRequest{
		ChildID: created.ChildID, Request: req, Tools: []tools.Tool{whoamiTool(h, seen)},
	})
	require.NoError(t, err)

	results := toolResults(t, f.events(t, created.ChildID))
	require.Len(t, results, 1)
	assert.False(t, results[0].IsError)
	assert.Equal(t, "you are "+created.ChildID, session.JoinText(results[0].Content))
	reqs := f.recorder.requests(created.ChildID)
	require.NotEmpty(t, reqs)
	assert.Contains(t, toolNames(reqs[0]), "whoami", "the model sees the run tool")
	assert.Contains(t, toolNames(reqs[0]), "read_file", "beside the preset's tools")

	child := <-seen
	for _, tool := range child.Scope().Visible() {
		assert.NotEqual(t, "whoami", tool.Name, "the run tool is revoked at teardown")
	}
}

func TestToolFilterAppliesToRunTools(t *testing.T) {
	tests := []struct {
		name    string
		filter  subagent.ToolFilter
		visible []string
		runs    bool // whether the child's call of the run tool runs
	}{
		{"deny hides the run tool", subagent.ToolFilter{Deny: []string{"whoami"}},
			[]string{"count", "grep", "list_dir", "read_file", "write_file"}, false},
		{"allow of global tools hides it", subagent.ToolFilter{Allow: []string{"read_file"}},
			[]string{"read_file"}, false},
		{"allow of the run tool only", subagent.ToolFilter{Allow: []string{"whoami"}},
			[]string{"whoami"}, true},
		{"allow of both", subagent.ToolFilter{Allow: []string{"whoami", "grep"}, Deny: []string{"grep"}},
			[]string{"whoami"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.script(t, "child.json", `{"toolCalls": [{"name": "whoami", "input": {}}]}`, `{"text": "done"}`)
			parent := f.parent(t, session.Header{Route: route("child.json")})
			req := request(parent, "go")
			req.ToolFilter = &tt.filter

			r, err := f.host.Start(context.Background(), req, StartOptions{Tools: []tools.Tool{whoamiTool(f.host, nil)}})
			require.NoError(t, err)
			result(t, r)
			reqs := f.recorder.requests(r.ID())
			require.NotEmpty(t, reqs)
			assert.Equal(t, tt.visible, toolNames(reqs[0]))
			results := toolResults(t, f.events(t, r.ID()))
			require.Len(t, results, 1)
			if tt.runs {
				assert.Equal(t, "you are "+r.ID(), session.JoinText(results[0].Content))
			} else {
				assert.Contains(t, session.JoinText(results[0].Content), `Error: unknown tool "whoami"`)
			}
		})
	}
}

func TestToolFilterNamingRunToolsNeedsTheirNamesAtCreate(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	req := request(parent, "go")
	req.ToolFilter = &subagent.ToolFilter{Deny: []string{"whoami"}}

	_, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
	require.EqualError(t, err, `tools.restrict() names unknown global tool "whoami"; known global tools: count, grep, list_dir, read_file, write_file`)
	_, err = f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req, RunTools: []string{"whoami"}})
	require.NoError(t, err)
}

func TestRunToolMustNotShadowAGlobalTool(t *testing.T) {
	f := newFixture(t)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	shadow := whoamiTool(f.host, nil)
	shadow.Name = "read_file"

	_, err := f.host.Start(context.Background(), request(parent, "go"), StartOptions{Tools: []tools.Tool{shadow}})
	require.ErrorContains(t, err, `"read_file": a global tool with this name exists`)
	assert.Equal(t, []string{parent}, f.sessions(t), "the failed start left nothing behind")
}
