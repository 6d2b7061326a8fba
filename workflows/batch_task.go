package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// Task is one delegation of a batch: one line of a batch file (SPEC R-81). Its fields are
// those of `starter run`'s flags, under the flags' names; Task is the positional TASK.
type Task struct {
	Provider      string `json:"provider,omitempty"`
	Task          string `json:"task"`
	Parent        string `json:"parent,omitempty"`
	Cwd           string `json:"cwd,omitempty"`
	ModelProvider string `json:"model-provider,omitempty"`
	Model         string `json:"model,omitempty"`
	MaxTokens     int64  `json:"max-tokens,omitempty"`
	// Schema is the JSON schema of a structured result, inline (an object).
	Schema   json.RawMessage `json:"schema,omitempty"`
	MaxDepth *int64          `json:"max-depth,omitempty"`
	Persona  string          `json:"persona,omitempty"`
	Allow    []string        `json:"allow,omitempty"`
	Deny     []string        `json:"deny,omitempty"`
	Label    string          `json:"label,omitempty"`
	// ID is the child's workflow id; empty means subagent-<childId>.
	ID string `json:"id,omitempty"`
	// Timeout is the run's deadline, a Go duration such as "90s" or "10m" (StartInput.Timeout).
	Timeout string `json:"timeout,omitempty"`
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
// (no task, no error). Unknown fields and a missing task text are errors. A UTF-8 byte
// order mark before the line (the start of a file some editors wrote) is ignored.
func ParseTaskLine(line []byte) (t Task, blank bool, err error) {
	line = bytes.TrimSpace(bytes.TrimPrefix(line, []byte("\ufeff")))
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
	if strings.TrimSpace(t.Task) == "" {
		return Task{}, false, errors.New(`missing "task"`)
	}
	return t, false, nil
}

// StartInput returns the StartSubagent input of t in batch, like `starter run` builds it
// from its flags (SPEC ): without a parent the run creates a root session in the
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
	req := subagent.Request{
		Label:        t.Label,
		Prompt:       []session.Block{session.Text(t.Task)},
		Persona:      t.Persona,
		AgentOptions: session.Route{Provider: t.ModelProvider, Model: t.Model, MaxTokens: t.MaxTokens},
		MaxDepth:     t.MaxDepth,
		OutputSchema: t.Schema,
	}
	if len(t.Allow) > 0 || len(t.Deny) > 0 {
		req.ToolFilter = &subagent.ToolFilter{Allow: t.Allow, Deny: t.Deny}
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
	in := StartInput{Provider: provider, Request: req, Batch: batch, Timeout: timeout}
	in.Request.Parent = subagent.ParentRef{SessionID: t.Parent, Cwd: cwd}
	if t.Parent == "" {
		route := in.Request.AgentOptions
		if route.Provider == "" {
			route.Provider = d.Route.Provider
		}
		if route.Model == "" && route.Provider == d.Route.Provider {
			route.Model = d.Route.Model
		}
		// As with `starter run`: the request repeats the root route, because sdk children
		// take their route from the request only (SPEC R-83).
		in.Request.AgentOptions = route
		in.Root = &RootSession{Cwd: cwd, Route: route}
	}
	return in, nil
}

func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}
