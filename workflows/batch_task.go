package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// Task is one delegation of a batch: one line of a batch file (contract R-81). Its canonical
// field names are those of the `subagent` tool (camelCase: modelProvider, maxTokens,
// maxDepth, outputSchema); the names of `starter run`'s flags (model-provider, max-tokens,
// max-depth, schema) are accepted too. Task is the positional TASK.
type Task struct {
	Provider      string `json:"provider,omitempty"`
	Task          string `json:"task"`
	Parent        string `json:"parent,omitempty"`
	Cwd           string `json:"cwd,omitempty"`
	ModelProvider string `json:"modelProvider,omitempty"`
	Model         string `json:"model,omitempty"`
	MaxTokens     int64  `json:"maxTokens,omitempty"`
	// TokenBudget ends the run max-tokens once its turn used this many tokens.
	TokenBudget int64 `json:"tokenBudget,omitempty"`
	// Schema is the JSON schema of a structured result, inline (an object).
	Schema   json.RawMessage `json:"outputSchema,omitempty"`
	MaxDepth *int64          `json:"maxDepth,omitempty"`
	Persona  string          `json:"persona,omitempty"`
	Allow    []string        `json:"allow,omitempty"`
	Deny     []string        `json:"deny,omitempty"`
	Label    string          `json:"label,omitempty"`
	// ID is the child's workflow id; empty means subagent-<childId>.
	ID string `json:"id,omitempty"`
	// Timeout is the run's deadline, a Go duration such as "90s" or "10m" (StartInput.Timeout).
	Timeout string `json:"timeout,omitempty"`
	// TaskQueue is the task queue the task's child starts on, set by the starter from the
	// workspace root holding its cwd (subflow.Workspaces.RouteTask); empty means the batch's
	// children's queue. A batch file cannot set it (ParseTaskLine).
	TaskQueue string `json:"taskQueue,omitempty"`
}

// taskAliases maps the flag names a task line may use to the canonical field names.
var taskAliases = map[string]string{
	"model-provider": "modelProvider",
	"max-tokens":     "maxTokens",
	"max-depth":      "maxDepth",
	"schema":         "outputSchema",
	"token-budget":   "tokenBudget",
}

// UnmarshalJSON decodes a task under either name of each field; a field given under both
// names and an unknown field are errors.
func (t *Task) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if !isJSONObject(data) || json.Unmarshal(data, &fields) != nil {
		return errors.New("a task must be a JSON object")
	}
	// In a fixed order, so a task with several conflicts always gets the same error.
	for _, alias := range slices.Sorted(maps.Keys(taskAliases)) {
		name := taskAliases[alias]
		_, a := fields[alias]
		_, n := fields[name]
		if a && n {
			return fmt.Errorf("both %q and %q given", name, alias)
		}
	}
	type task Task // without the method, and named so in decode errors
	var w struct {
		task
		AliasModelProvider string          `json:"model-provider"`
		AliasMaxTokens     int64           `json:"max-tokens"`
		AliasMaxDepth      *int64          `json:"max-depth"`
		AliasSchema        json.RawMessage `json:"schema"`
		AliasTokenBudget   int64           `json:"token-budget"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			// Name the field as the line spells it, on Task.
			return fmt.Errorf("json: cannot unmarshal %s into Go struct field Task.%s of type %s", ute.Value, ute.Field, ute.Type)
		}
		return err
	}
	*t = Task(w.task)
	if _, ok := fields["model-provider"]; ok {
		t.ModelProvider = w.AliasModelProvider
	}
	if _, ok := fields["max-tokens"]; ok {
		t.MaxTokens = w.AliasMaxTokens
	}
	if _, ok := fields["max-depth"]; ok {
		t.MaxDepth = w.AliasMaxDepth
	}
	if _, ok := fields["schema"]; ok {
		t.Schema = w.AliasSchema
	}
	if _, ok := fields["token-budget"]; ok {
		t.TokenBudget = w.AliasTokenBudget
	}
	return nil
}

// TaskDefaults completes the tasks of a batch, as the starter's own environment completes
// `starter run`.
type TaskDefaults struct {
	// Dir is the absolute directory relative task cwds resolve against, and the cwd of the
	// root session of a task with neither parent nor cwd.
	Dir string `json:"dir,omitempty"`
	// Route is the route of a root session whose task names no model provider; its Model
	// also applies when the task names Route.Provider without a model.
	Route session.Route `json:"route,omitzero"`
}

// ParseTaskLine decodes one line of a batch file. A line of only white space is blank
// (no task, no error). Unknown fields and a missing task text are errors. The line is
// JSON: a byte order mark at the start of the file is for its reader to remove.
func ParseTaskLine(line []byte) (t Task, blank bool, err error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Task{}, true, nil
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Task{}, false, fmt.Errorf("not a task object: %w", err)
	}
	if dec.More() {
		return Task{}, false, errors.New("more than one JSON value on the line")
	}
	if t.TaskQueue != "" {
		// The starter routes each task by its cwd; a line naming a queue stays an unknown
		// field, as it always was.
		return Task{}, false, errors.New(`not a task object: json: unknown field "taskQueue"`)
	}
	if strings.TrimSpace(t.Task) == "" {
		return Task{}, false, errors.New(`missing "task"`)
	}
	return t, false, nil
}

// StartInput returns the StartSubagent input of t in batch, like `starter run` builds it
// from its flags (contract ): without a parent the run creates a root session in the
// task's cwd (resolved against d.Dir) routed by the task's route fields, completed by
// d.Route; with a parent the route fields override the parent's route field by field. It
// does no I/O: the cwd is checked by the worker, the request by StartSubagent.
func (t Task) StartInput(batch string, d TaskDefaults) (StartInput, error) {
	if strings.TrimSpace(t.Task) == "" {
		return StartInput{}, errors.New(`task: missing "task"`)
	}
	if t.MaxTokens < 0 {
		return StartInput{}, fmt.Errorf("task: max-tokens must be a positive integer: %d", t.MaxTokens)
	}
	if t.TokenBudget < 0 {
		return StartInput{}, fmt.Errorf("task: tokenBudget must be a positive integer: %d", t.TokenBudget)
	}
	if len(t.Schema) > 0 && !isJSONObject(t.Schema) {
		return StartInput{}, errors.New("task: schema must be a JSON object")
	}
	var timeout time.Duration
	if t.Timeout != "" {
		d, err := time.ParseDuration(t.Timeout)
		if err != nil || d <= 0 {
			return StartInput{}, fmt.Errorf("task: timeout must be a positive duration such as \"90s\" or \"10m\": %q", t.Timeout)
		}
		timeout = d
	}
	provider := t.Provider
	if provider == "" {
		provider = subagent.ProviderSpawn
	}
	var cwd string
	if t.Cwd != "" || t.Parent == "" {
		cwd = t.Cwd
		if !filepath.IsAbs(cwd) {
			if !filepath.IsAbs(d.Dir) {
				return StartInput{}, fmt.Errorf("task: cwd %q is relative and the batch has no absolute directory", cwd)
			}
			cwd = filepath.Join(d.Dir, cwd)
		}
		cwd = filepath.Clean(cwd)
	}
	req := subagent.Delegation{
		Task:         t.Task,
		Label:        t.Label,
		Persona:      t.Persona,
		Route:        session.Route{Provider: t.ModelProvider, Model: t.Model, MaxTokens: t.MaxTokens, TokenBudget: t.TokenBudget},
		MaxDepth:     t.MaxDepth,
		OutputSchema: t.Schema,
		Allow:        t.Allow,
		Deny:         t.Deny,
	}.Request(subagent.ParentRef{SessionID: t.Parent})
	in := StartInput{Provider: provider, Request: req, Batch: batch, Timeout: Duration(timeout)}
	if t.Parent != "" {
		in.Request.Parent.Cwd = cwd
		return in, nil
	}
	// A root run stores its cwd and route once, in Root (StartInput.Cwd, StartInput.Route).
	route := in.Request.AgentOptions
	if route.Provider == "" {
		route.Provider = d.Route.Provider
	}
	if route.Model == "" && route.Provider == d.Route.Provider {
		route.Model = d.Route.Model
	}
	in.Request.AgentOptions = session.Route{}
	in.Root = &RootSession{Cwd: cwd, Route: route}
	return in, nil
}

func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// TaskOf returns the task that StartInput in was built from (see Task.StartInput), with its
// cwd and route resolved: a retried batch starts it again as it ran. The workflow id is
// left out, so the new run gets its own.
func TaskOf(in StartInput) Task {
	r := in.Request
	route := in.Route()
	t := Task{
		Provider:      in.Provider,
		Task:          session.JoinText(r.Prompt),
		Parent:        r.Parent.SessionID,
		Cwd:           in.Cwd(),
		ModelProvider: route.Provider,
		Model:         route.Model,
		MaxTokens:     route.MaxTokens,
		TokenBudget:   route.TokenBudget,
		Schema:        r.OutputSchema,
		MaxDepth:      r.MaxDepth,
		Persona:       r.Persona,
		Label:         r.Label,
	}
	if f := r.ToolFilter; f != nil {
		t.Allow, t.Deny = f.Allow, f.Deny
	}
	return t
}
