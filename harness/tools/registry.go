package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
)

// toolName is the name syntax model APIs accept for functions (OpenAI and DeepSeek alike).
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validateTool reports why t cannot be registered, naming the tool and the operation op.
func validateTool(op string, t Tool) error {
	if t.Name == "" {
		return fmt.Errorf("%s: tool name is empty", op)
	}
	if !toolName.MatchString(t.Name) {
		return fmt.Errorf("%s %q: tool name must be 1-64 letters, digits, '_' or '-'", op, t.Name)
	}
	if t.Handler == nil {
		return fmt.Errorf("%s %q: handler is nil", op, t.Name)
	}
	if !isJSONObject(t.Parameters) {
		return fmt.Errorf("%s %q: parameters must be a JSON schema object, got %.40q", op, t.Name, t.Parameters)
	}
	return nil
}

// isJSONObject reports whether raw is one valid JSON object.
func isJSONObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// cloneTool copies t's parameters so a caller reusing its buffer cannot change a registered tool.
func cloneTool(t Tool) Tool {
	t.Parameters = append(json.RawMessage(nil), t.Parameters...)
	return t
}

// Registry holds the global tools every scope starts from. The zero value is an empty registry
// ready for use; a Registry is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// Register adds t. It fails when the name is empty or malformed, already registered, the handler
// is nil, or the parameters are not a JSON object.
func (r *Registry) Register(t Tool) error {
	if err := validateTool("tools: register", t); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[t.Name]; dup {
		return fmt.Errorf("tools: register %q: a global tool with this name is already registered", t.Name)
	}
	if r.tools == nil {
		r.tools = make(map[string]Tool)
	}
	r.tools[t.Name] = cloneTool(t)
	return nil
}

// Lookup returns the global tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Names returns the names of all global tools, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.tools))
}

// all returns every global tool, in no particular order.
func (r *Registry) all() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	return out
}
