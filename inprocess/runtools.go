package inprocess

import (
	"slices"

	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

// restrict applies a request's tool filter to scope, whose global tools are those of
// global. Names in runTools are tools a drive registers in the child's scope itself (see
// DriveRequest.Tools): Scope.Restrict knows only global tools, so they are taken out of the
// filter here and decided by runToolAllowed. Any other name must be a global tool, else the
// error is the *tools.UnknownToolError of contract R-25.
func restrict(scope *tools.Scope, global *tools.Registry, f *subagent.ToolFilter, runTools []string) error {
	if f == nil {
		return nil
	}
	var allow, deny []string
	for _, name := range f.Allow {
		if !slices.Contains(runTools, name) {
			allow = append(allow, name)
		}
	}
	for _, name := range f.Deny {
		if !slices.Contains(runTools, name) {
			deny = append(deny, name)
		}
	}
	if len(f.Allow) > 0 && len(allow) == 0 {
		// The allow list names run tools only, so no global tool is allowed: an empty allow
		// list would mean every one.
		deny = append(deny, global.Names()...)
	}
	return scope.Restrict(allow, deny)
}

// runToolAllowed reports whether the filter lets the run tool name through: scoped
// registrations are never hidden by Scope.Restrict, so a drive registers only these.
func runToolAllowed(f *subagent.ToolFilter, name string) bool {
	if f == nil {
		return true
	}
	if len(f.Allow) > 0 && !slices.Contains(f.Allow, name) {
		return false
	}
	return !slices.Contains(f.Deny, name)
}

// namesOf returns the names of ts.
func namesOf(ts []tools.Tool) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}
