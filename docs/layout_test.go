package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cardLayout is the top level the project's design card fixes: the folders a user holding
// the card looks for, each a public package of the same name where it is Go.
var cardLayout = []string{
	"go.mod", "go.sum", "workflows/", "activities/", "worker/", "starter/", "inprocess/",
	"sdkproc/", "docker-compose.yml", "test/", "README.md",
}

// TestCardLayout fails when an entry of the card's top level is missing, or when one of its
// library folders holds no package of its own (moved under internal/, say).
func TestCardLayout(t *testing.T) {
	for _, entry := range cardLayout {
		path := filepath.Join("..", strings.TrimSuffix(entry, "/"))
		st, err := os.Stat(path)
		switch {
		case err != nil:
			t.Errorf("the card's %s is missing: %v", entry, err)
		case strings.HasSuffix(entry, "/") != st.IsDir():
			t.Errorf("the card's %s: want a directory %v, have %v", entry, strings.HasSuffix(entry, "/"), st.IsDir())
		}
	}
	for _, pkg := range []string{"workflows", "activities", "inprocess", "sdkproc"} {
		out, err := exec.Command("go", "list", "-f", "{{.Name}}", module+"/"+pkg).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != pkg {
			t.Errorf("%s/ should hold package %s: go list says %q (%v)", pkg, pkg, out, err)
		}
	}
}

// outsideMain is a user's program in a module of its own: it imports the card's libraries
// and a worker of its own, which Go refuses when they sit under internal/.
const outsideMain = `package main

import (
	"fmt"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/sdkproc"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

func main() {
	fmt.Println(inprocess.NewHost, sdkproc.New, activities.New, activities.Register,
		workflows.Register, workflows.ExecuteSubagent, app.New)
}
`

// TestOutsideModuleBuilds builds a module outside the repository that imports inprocess,
// sdkproc, activities, workflows and worker/app, and checks that the embedded Temporal server
// stays out of its module graph.
func TestOutsideModuleBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/user\n\ngo 1.26.8\n\nrequire " + module + " v0.0.0\n\nreplace " + module + " => " + root + "\n"
	for name, data := range map[string]string{"go.mod": gomod, "main.go": outsideMain} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The library's go.sum has every hash its packages need: nothing to look up.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false")
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a module outside the repository: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("build", "-o", filepath.Join(dir, "user"), ".")
	if graph := run("list", "-m", "all"); strings.Contains(graph, "go.temporal.io/server") {
		t.Errorf("the user's module graph holds the Temporal server:\n%s", graph)
	}
}

// TestDriversKnowNoTemporal: the two systems subflow runs are plain Go libraries; only
// activities puts them on Temporal.
func TestDriversKnowNoTemporal(t *testing.T) {
	for _, pkg := range []string{"inprocess", "sdkproc"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for dep := range strings.Lines(string(out)) {
			if strings.HasPrefix(dep, "go.temporal.io/") {
				t.Errorf("%s depends on %s: it must stay usable without Temporal", pkg, strings.TrimSpace(dep))
			}
		}
	}
}
