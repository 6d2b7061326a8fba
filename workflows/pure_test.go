package workflows

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is this repository's module path.
const module = "github.com/subflow-dev/subflow/"

// purePackages are the packages of this module that workflow code may reach: they do no I/O,
// so the workflow stays deterministic on replay. Everything else of the module (the session
// stores, the tools, the providers, the activities, client) does I/O or dials, and workflow
// code must not import it, even for a type: a type pulls its package's init and invites a
// call.
var purePackages = []string{
	module + "harness/session",
	module + "subagent",
	module + "workflows",
}

// ioImports are the standard-library and system packages a pure package must not import
// directly: files, processes, the network, randomness and the clock outside workflow.Now.
var ioImports = []string{
	"crypto/rand", "io/fs", "io/ioutil", "math/rand", "math/rand/v2", "net", "net/http", "os",
	"os/exec", "os/signal", "syscall", "golang.org/x/sys/unix",
}

// TestWorkflowsStayPure fails when package workflows reaches (directly or through another
// package) a package of this module outside purePackages, or when one of purePackages imports
// an I/O package itself. It reads the graph from `go list`, as the build sees it.
func TestWorkflowsStayPure(t *testing.T) {
	deps := goList(t, "-deps", "-f", "{{.ImportPath}}", ".")
	for _, dep := range deps {
		if strings.HasPrefix(dep, module) && !slices.Contains(purePackages, dep) {
			t.Errorf("workflows reaches %s, which may do I/O: move what the workflow needs into a pure package (%s)",
				dep, strings.Join(purePackages, ", "))
		}
	}
	for _, pkg := range purePackages {
		for _, imp := range goList(t, "-f", `{{join .Imports "\n"}}`, pkg) {
			if slices.Contains(ioImports, imp) {
				t.Errorf("%s imports %s: workflow code reaches it, so it must do no I/O", pkg, imp)
			}
		}
	}
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}
