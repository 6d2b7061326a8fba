package tools

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// UnknownToolError is returned by Scope.Restrict when a name is not a global tool.
type UnknownToolError struct {
	Name  string   // the first unknown name, allow list before deny list
	Known []string // the global tool names, sorted
}

func (e *UnknownToolError) Error() string {
	return fmt.Sprintf("tools.restrict() names unknown global tool %q; known global tools: %s",
		e.Name, strings.Join(e.Known, ", "))
}

// Scope is one agent's view of the tools: the global tools of a Registry, narrowed by
// restrictions, plus tools registered in this scope only, with the guards and observers that
// wrap every execution. Scopes are flat: a new scope inherits nothing from any other scope.
// A Scope is safe for concurrent use.
type Scope struct {
	global *Registry

	mu        sync.RWMutex
	nextID    uint64
	scoped    map[string]scopedTool
	allow     map[string]bool // nil: every global tool is allowed
	deny      map[string]bool
	guards    []entry[Guard]
	observers []entry[Observer]
}

type scopedTool struct {
	id   uint64
	tool Tool
}

// entry is one guard or observer of a scope, with the id its remove function looks for.
type entry[T any] struct {
	id uint64
	v  T
}

// addEntry appends v to *list, one of s's lists, and returns the function that takes it out
// again; calling that function again does nothing.
func addEntry[T any](s *Scope, list *[]entry[T], v T) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := s.nextID
	*list = append(*list, entry[T]{id: id, v: v})
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, e := range *list {
			if e.id == id {
				*list = append((*list)[:i:i], (*list)[i+1:]...)
				return
			}
		}
	}
}

// values returns the values of list, one of s's lists, in order, so they run without holding
// the lock.
func values[T any](s *Scope, list *[]entry[T]) []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]T, len(*list))
	for i, e := range *list {
		out[i] = e.v
	}
	return out
}

// NewScope returns a fresh scope over global (nil: no global tools) with no restrictions,
// scoped registrations, guards or observers.
func NewScope(global *Registry) *Scope {
	if global == nil {
		global = &Registry{}
	}
	return &Scope{global: global, scoped: make(map[string]scopedTool), deny: make(map[string]bool)}
}

// Register adds t to this scope only: other scopes over the same registry never see it, and
// restrictions never hide it. The name must not be taken by a global tool or another scoped
// registration. revoke removes the registration; calling it again does nothing.
func (s *Scope) Register(t Tool) (revoke func(), err error) {
	if err := validateTool("tools: scope register", t); err != nil {
		return nil, err
	}
	if _, taken := s.global.Lookup(t.Name); taken {
		return nil, fmt.Errorf("tools: scope register %q: a global tool with this name exists", t.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.scoped[t.Name]; dup {
		return nil, fmt.Errorf("tools: scope register %q: already registered in this scope", t.Name)
	}
	s.nextID++
	id := s.nextID
	s.scoped[t.Name] = scopedTool{id: id, tool: cloneTool(t)}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		// The id check keeps a stale revoke from removing a later registration of the same name.
		if cur, ok := s.scoped[t.Name]; ok && cur.id == id {
			delete(s.scoped, t.Name)
		}
	}, nil
}

// Restrict narrows the global tools visible in this scope. A non-empty allow keeps only the
// named tools; deny removes the named tools. Every name must be a registered global tool, else
// the result is an *UnknownToolError and nothing changes. Restrictions accumulate: a later call
// narrows further and can never widen what an earlier call removed. Scoped registrations are
// never hidden.
func (s *Scope) Restrict(allow, deny []string) error {
	for _, list := range [][]string{allow, deny} {
		for _, name := range list {
			if _, ok := s.global.Lookup(name); !ok {
				return &UnknownToolError{Name: name, Known: s.global.Names()}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(allow) > 0 {
		next := make(map[string]bool, len(allow))
		for _, name := range allow {
			if s.allow == nil || s.allow[name] {
				next[name] = true
			}
		}
		s.allow = next
	}
	for _, name := range deny {
		s.deny[name] = true
	}
	return nil
}

// AddGuard adds g after the guards already added. remove takes it out again; calling remove
// again does nothing.
func (s *Scope) AddGuard(g Guard) (remove func()) {
	return addEntry(s, &s.guards, g)
}

// AddObserver adds o after the observers already added. remove takes it out again; calling
// remove again does nothing.
func (s *Scope) AddObserver(o Observer) (remove func()) {
	return addEntry(s, &s.observers, o)
}

// Visible returns the tools the model may call in this scope, sorted by name: the allowed
// global tools and every scoped registration.
func (s *Scope) Visible() []Tool {
	globals := s.global.all()
	s.mu.RLock()
	out := make([]Tool, 0, len(globals)+len(s.scoped))
	for _, t := range globals {
		if _, shadowed := s.scoped[t.Name]; !shadowed && s.allowedLocked(t.Name) {
			out = append(out, t)
		}
	}
	for _, st := range s.scoped {
		out = append(out, st.tool)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// lookup finds the tool called name as this scope sees it; a scoped registration comes first.
func (s *Scope) lookup(name string) (Tool, bool) {
	s.mu.RLock()
	st, scoped := s.scoped[name]
	allowed := s.allowedLocked(name)
	s.mu.RUnlock()
	if scoped {
		return st.tool, true
	}
	if !allowed {
		return Tool{}, false
	}
	return s.global.Lookup(name)
}

// allowedLocked reports whether the restrictions let the global tool name through.
func (s *Scope) allowedLocked(name string) bool {
	if s.allow != nil && !s.allow[name] {
		return false
	}
	return !s.deny[name]
}

// currentGuards returns the guards in order, so they run without holding the lock.
func (s *Scope) currentGuards() []Guard {
	return values(s, &s.guards)
}

// currentObservers returns the observers in order, so they run without holding the lock.
func (s *Scope) currentObservers() []Observer {
	return values(s, &s.observers)
}
