package workflows

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

func TestParseTaskLine(t *testing.T) {
	task, blank, err := ParseTaskLine([]byte(`{"task": "sum up", "provider": "fork", "max-depth": 2, "allow": ["read_file"], "schema": {"type": "object"}}` + "\n"))
	require.NoError(t, err)
	assert.False(t, blank)
	assert.Equal(t, Task{Task: "sum up", Provider: "fork", MaxDepth: ptr(int64(2)), Allow: []string{"read_file"},
		Schema: json.RawMessage(`{"type": "object"}`)}, task)

	camel, _, err := ParseTaskLine([]byte(`{"task": "sum up", "provider": "fork", "maxDepth": 2, "allow": ["read_file"], "outputSchema": {"type": "object"}}`))
	require.NoError(t, err)
	assert.Equal(t, task, camel, "the subagent tool's names are the canonical ones")
	mixed, _, err := ParseTaskLine([]byte(`{"task": "t", "modelProvider": "scripted", "max-tokens": 7}`))
	require.NoError(t, err)
	assert.Equal(t, Task{Task: "t", ModelProvider: "scripted", MaxTokens: 7}, mixed)
	raw, err := json.Marshal(mixed)
	require.NoError(t, err)
	assert.JSONEq(t, `{"task": "t", "modelProvider": "scripted", "maxTokens": 7}`, string(raw), "encoded under the canonical names")

	_, blank, err = ParseTaskLine([]byte("  \t\r\n"))
	require.NoError(t, err)
	assert.True(t, blank, "white space is a blank line")

	for line, want := range map[string]string{
		`{"prompt": "x"}`:                 `not a task object: json: unknown field "prompt"`,
		`{"task": "  "}`:                  `missing "task"`,
		`{"task": "a"} {}`:                "more than one JSON value on the line",
		`["task"]`:                        "not a task object: a task must be a JSON object",
		`{"task": "a", "max-depth": "2"}`: `not a task object: json: cannot unmarshal string into Go struct field Task.max-depth of type int64`,
		`{"task": "a", "maxTokens": 1, "max-tokens": 2}`: `not a task object: both "maxTokens" and "max-tokens" given`,
		`{"task": "a", "taskQueue": "q@local:/srv"}`:     `not a task object: json: unknown field "taskQueue"`,
	} {
		_, _, err := ParseTaskLine([]byte(line))
		assert.EqualError(t, err, want, line)
	}
}

func TestTaskStartInput(t *testing.T) {
	t.Run("root session from the defaults", func(t *testing.T) {
		in, err := Task{Task: "go", Cwd: "sub", Label: "l"}.StartInput("b", batchDefaults)
		require.NoError(t, err)
		route := batchDefaults.Route
		assert.Equal(t, StartInput{
			Provider: subagent.ProviderSpawn,
			Batch:    "b",
			Request: subagent.Request{
				Label:  "l",
				Prompt: []session.Block{session.Text("go")},
			},
			Root: &RootSession{Cwd: "/work/sub", Route: route},
		}, in, "a root run's cwd and route are stored once, in Root")
		assert.Equal(t, "/work/sub", in.Cwd())
		assert.Equal(t, route, in.Route())
	})
	t.Run("the task's route wins field by field", func(t *testing.T) {
		in, err := Task{Task: "go", ModelProvider: "scripted", Model: "s.json", MaxTokens: 9, Cwd: "/abs"}.StartInput("b", batchDefaults)
		require.NoError(t, err)
		want := session.Route{Provider: "scripted", Model: "s.json", MaxTokens: 9}
		assert.Equal(t, want, in.Root.Route)
		assert.Equal(t, want, in.Route())
		assert.Equal(t, "/abs", in.Cwd())
	})
	t.Run("parent session", func(t *testing.T) {
		in, err := Task{Task: "go", Provider: "fork", Parent: "p1", Model: "m", Deny: []string{"bash"},
			Persona: "terse", MaxDepth: ptr(int64(3)), Schema: json.RawMessage(`{"type":"object"}`)}.StartInput("b", batchDefaults)
		require.NoError(t, err)
		assert.Nil(t, in.Root)
		assert.Equal(t, subagent.ParentRef{SessionID: "p1"}, in.Request.Parent)
		assert.Equal(t, session.Route{Model: "m"}, in.Request.AgentOptions, "the parent's route fills the rest")
		assert.Equal(t, &subagent.ToolFilter{Deny: []string{"bash"}}, in.Request.ToolFilter)
		assert.Equal(t, "terse", in.Request.Persona)
		assert.True(t, in.Request.HasOutputSchema())
		assert.EqualValues(t, 3, *in.Request.MaxDepth)
	})
	for name, task := range map[string]Task{
		"no task":             {},
		"negative max-tokens": {Task: "x", MaxTokens: -1},
		"schema not object":   {Task: "x", Schema: json.RawMessage(`"string"`)},
	} {
		_, err := task.StartInput("b", batchDefaults)
		assert.Error(t, err, name)
	}
	_, err := Task{Task: "x", Cwd: "rel"}.StartInput("b", TaskDefaults{})
	assert.EqualError(t, err, `task: cwd "rel" is relative and the batch has no absolute directory`)
}

func TestDurationsPercentiles(t *testing.T) {
	var h Durations
	assert.Zero(t, h.Percentile(50))
	for ms := 1; ms <= 1000; ms++ {
		h.Add(time.Duration(ms) * time.Millisecond)
	}
	assert.InEpsilon(t, 500*time.Millisecond, h.Percentile(50), 1.0/16)
	assert.InEpsilon(t, 990*time.Millisecond, h.Percentile(99), 1.0/16)
	assert.LessOrEqual(t, h.Percentile(100), time.Second, "never above the maximum")
	assert.LessOrEqual(t, len(h.Buckets), 8*8+8, "the histogram stays small")

	var small Durations
	small.Add(3 * time.Millisecond)
	assert.Equal(t, 3*time.Millisecond, small.Percentile(99), "short durations are exact")
}

func TestTaskTimeout(t *testing.T) {
	in, err := Task{Task: "x", Timeout: "90s"}.StartInput("b", TaskDefaults{Dir: "/"})
	require.NoError(t, err)
	assert.Equal(t, Duration(90*time.Second), in.Timeout)
	for _, bad := range []string{"soon", "-1m", "0s"} {
		_, err := Task{Task: "x", Timeout: bad}.StartInput("b", TaskDefaults{Dir: "/"})
		assert.ErrorContains(t, err, "task: timeout must be a positive duration", bad)
	}
}

// TestStartInputCwdAndRoute: a run's cwd and route are read through one method each,
// whichever of the input's fields a caller of the JSON contract filled.
func TestStartInputCwdAndRoute(t *testing.T) {
	root := &RootSession{Cwd: "/root", Route: session.Route{Provider: "deepseek", Model: "m1", MaxTokens: 5}}
	for name, tc := range map[string]struct {
		in    StartInput
		cwd   string
		route session.Route
	}{
		"root run": {in: StartInput{Root: root}, cwd: "/root", route: root.Route},
		"root run, the request overrides the model": {
			in:    StartInput{Root: root, Request: subagent.Request{AgentOptions: session.Route{Model: "m2"}}},
			cwd:   "/root",
			route: session.Route{Provider: "deepseek", Model: "m2", MaxTokens: 5},
		},
		"root without a cwd keeps the request's": {
			in:  StartInput{Root: &RootSession{}, Request: subagent.Request{Parent: subagent.ParentRef{Cwd: "/req"}}},
			cwd: "/req",
		},
		"stored parent: the root is not read": {
			in: StartInput{Root: root, Request: subagent.Request{Parent: subagent.ParentRef{SessionID: "p", Cwd: "/elsewhere"},
				AgentOptions: session.Route{Model: "m3"}}},
			cwd:   "/elsewhere",
			route: session.Route{Model: "m3"},
		},
		"stored parent, its own cwd": {in: StartInput{Request: subagent.Request{Parent: subagent.ParentRef{SessionID: "p"}}}},
	} {
		assert.Equal(t, tc.cwd, tc.in.Cwd(), name)
		assert.Equal(t, tc.route, tc.in.Route(), name)
	}
}
