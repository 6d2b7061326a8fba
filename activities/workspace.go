package activities

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/workflows"
)

// TypeOutsideWorkspace is the type of the non-retryable error of a run whose cwd, resolved,
// lies outside every workspace root the worker serves (Config.WorkspaceRoots).
const TypeOutsideWorkspace = workflows.RuleOutsideWorkspace

// checkRoot fails non-retryable, naming this host, the cwd (and what it resolves to) and the
// served roots, when the worker serves workspace roots and cwd does not resolve under one of
// them: a symlink out of a root, or a cwd a run started around the starter names. Without
// roots every cwd passes (docs/deployment.md). The tools check every call again
// (tools.Env.Roots), so a cwd swapped for a symlink after this check is refused too.
func (a *Activities) checkRoot(what, cwd string) error {
	if len(a.roots) == 0 {
		return nil
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err == nil {
		for _, r := range a.roots {
			if rel, err := filepath.Rel(r, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return nil
			}
		}
	}
	host, _ := os.Hostname()
	resolved := real
	if err != nil {
		resolved = "(unresolvable: " + err.Error() + ")"
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"activities: %s: cwd %s (resolved %s) lies outside the workspace roots host %s serves: %s",
		what, cwd, resolved, host, strings.Join(a.roots, ", ")), TypeOutsideWorkspace, nil)
}
