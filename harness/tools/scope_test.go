package tools

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newGlobal(t *testing.T, names ...string) *Registry {
	t.Helper()
	r := &Registry{}
	for _, n := range names {
		require.NoError(t, r.Register(echoTool(n, nil)))
	}
	return r
}

func visibleNames(s *Scope) []string {
	var names []string
	for _, t := range s.Visible() {
		names = append(names, t.Name)
	}
	return names
}

func resultText(r Result) string {
	var s string
	for _, b := range r.Content {
		s += b.Text
	}
	return s
}

func TestRestrictUnknownNameFailsWithSpecMessage(t *testing.T) {
	s := NewScope(newGlobal(t, "read_file", "grep", "write_file"))

	err := s.Restrict([]string{"grep", "bogus"}, nil)
	require.EqualError(t, err,
		`tools.restrict() names unknown global tool "bogus"; known global tools: grep, read_file, write_file`)
	var unknown *UnknownToolError
	require.True(t, errors.As(err, &unknown))
	assert.Equal(t, "bogus", unknown.Name)

	err = s.Restrict(nil, []string{"nope"})
	require.EqualError(t, err,
		`tools.restrict() names unknown global tool "nope"; known global tools: grep, read_file, write_file`)

	// A failed Restrict changes nothing.
	assert.Equal(t, []string{"grep", "read_file", "write_file"}, visibleNames(s))
}

func TestRestrictScopedNameIsUnknownGlobalTool(t *testing.T) {
	s := NewScope(newGlobal(t, "grep"))
	_, err := s.Register(echoTool("structured_output", nil))
	require.NoError(t, err)

	err = s.Restrict([]string{"structured_output"}, nil)
	require.EqualError(t, err, `tools.restrict() names unknown global tool "structured_output"; known global tools: grep`)
}

func TestRestrictAllowAndDenyVisibility(t *testing.T) {
	global := newGlobal(t, "a", "b", "c", "d")

	allow := NewScope(global)
	require.NoError(t, allow.Restrict([]string{"c", "a"}, nil))
	assert.Equal(t, []string{"a", "c"}, visibleNames(allow))

	deny := NewScope(global)
	require.NoError(t, deny.Restrict(nil, []string{"b"}))
	assert.Equal(t, []string{"a", "c", "d"}, visibleNames(deny))

	both := NewScope(global)
	require.NoError(t, both.Restrict([]string{"a", "b"}, []string{"b"}))
	assert.Equal(t, []string{"a"}, visibleNames(both))

	// Scopes are flat: a fresh scope over the same registry inherits no restriction.
	assert.Equal(t, []string{"a", "b", "c", "d"}, visibleNames(NewScope(global)))
}

func TestRestrictOnlyNarrows(t *testing.T) {
	s := NewScope(newGlobal(t, "a", "b", "c"))
	require.NoError(t, s.Restrict([]string{"a", "b"}, nil))
	require.NoError(t, s.Restrict([]string{"b", "c"}, nil))
	assert.Equal(t, []string{"b"}, visibleNames(s))
	require.NoError(t, s.Restrict(nil, []string{"b"}))
	assert.Empty(t, visibleNames(s))
}

func TestHiddenToolExecutesAsUnknown(t *testing.T) {
	calls := 0
	global := &Registry{}
	require.NoError(t, global.Register(echoTool("a", &calls)))
	require.NoError(t, global.Register(echoTool("b", nil)))
	s := NewScope(global)
	require.NoError(t, s.Restrict(nil, []string{"a"}))

	res := s.Execute(context.Background(), Env{}, Call{ID: "1", Name: "a"})
	assert.True(t, res.IsError)
	assert.Equal(t, `Error: unknown tool "a"; available tools: b`, resultText(res))
	assert.Zero(t, calls)

	res = NewScope(nil).Execute(context.Background(), Env{}, Call{ID: "2", Name: "x"})
	assert.Equal(t, `Error: unknown tool "x"; no tools are available`, resultText(res))
}

func TestScopedRegistrationIsVisibleOnlyInItsScope(t *testing.T) {
	global := newGlobal(t, "grep", "read_file")
	child1, child2 := NewScope(global), NewScope(global)

	revoke1, err := child1.Register(echoTool("structured_output", nil))
	require.NoError(t, err)
	_, err = child2.Register(echoTool("other_output", nil))
	require.NoError(t, err)

	assert.Equal(t, []string{"grep", "read_file", "structured_output"}, visibleNames(child1))
	assert.Equal(t, []string{"grep", "other_output", "read_file"}, visibleNames(child2))
	assert.Equal(t, []string{"grep", "read_file"}, global.Names())

	res := child2.Execute(context.Background(), Env{}, Call{ID: "1", Name: "structured_output"})
	assert.True(t, res.IsError)
	assert.Contains(t, resultText(res), `Error: unknown tool "structured_output"`)

	res = child1.Execute(context.Background(), Env{}, Call{ID: "2", Name: "structured_output", Input: []byte(`{"x":1}`)})
	assert.False(t, res.IsError)
	assert.Equal(t, `structured_output {"x":1}`, resultText(res))

	revoke1()
	revoke1() // idempotent
	assert.Equal(t, []string{"grep", "read_file"}, visibleNames(child1))
	res = child1.Execute(context.Background(), Env{}, Call{ID: "3", Name: "structured_output"})
	assert.Contains(t, resultText(res), `unknown tool "structured_output"`)
}

func TestStaleRevokeKeepsLaterRegistration(t *testing.T) {
	s := NewScope(nil)
	revokeOld, err := s.Register(echoTool("tool", nil))
	require.NoError(t, err)
	revokeOld()
	_, err = s.Register(echoTool("tool", nil))
	require.NoError(t, err)
	revokeOld()
	assert.Equal(t, []string{"tool"}, visibleNames(s))
}

func TestRestrictionsNeverHideScopedRegistrations(t *testing.T) {
	s := NewScope(newGlobal(t, "grep", "read_file"))
	_, err := s.Register(echoTool("structured_output", nil))
	require.NoError(t, err)
	require.NoError(t, s.Restrict([]string{"grep"}, []string{"grep"}))
	assert.Equal(t, []string{"structured_output"}, visibleNames(s))
}

func TestScopeRegisterRejectsTakenAndInvalidNames(t *testing.T) {
	s := NewScope(newGlobal(t, "grep"))
	_, err := s.Register(echoTool("grep", nil))
	require.EqualError(t, err, `tools: scope register "grep": a global tool with this name exists`)

	_, err = s.Register(echoTool("mine", nil))
	require.NoError(t, err)
	_, err = s.Register(echoTool("mine", nil))
	require.EqualError(t, err, `tools: scope register "mine": already registered in this scope`)

	bad := echoTool("bad", nil)
	bad.Handler = nil
	_, err = s.Register(bad)
	require.EqualError(t, err, `tools: scope register "bad": handler is nil`)
}
