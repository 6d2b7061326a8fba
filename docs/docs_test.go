// Package docs holds the user and contributor documentation; its tests keep the parts that
// restate the code (the package graph, the search attributes, the flags, the paths, package
// names and identifiers it names) in step with it.
package docs

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/subflow-dev/subflow/devserver"
)

const module = "github.com/subflow-dev/subflow"

// TestPackageGraph checks the layout table of architecture.md against `go list`: one row per
// package of the module, listing exactly the module packages it imports (tests aside).
func TestPackageGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	want := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		pkg = short(pkg)
		if pkg == "docs" {
			continue
		}
		want[pkg] = []string{}
		for _, imp := range strings.Fields(imports) {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				want[pkg] = append(want[pkg], short(imp))
			}
		}
		slices.Sort(want[pkg])
	}

	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9/-]+)` \\| ([^|]*) \\|")
	got := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		imports := []string{}
		for _, imp := range regexp.MustCompile("`([a-z0-9/-]+)`").FindAllStringSubmatch(m[2], -1) {
			imports = append(imports, imp[1])
		}
		slices.Sort(imports)
		got[m[1]] = imports
	}
	for pkg, imports := range want {
		have, ok := got[pkg]
		switch {
		case !ok:
			t.Errorf("architecture.md: no row for %s (imports %s)", pkg, strings.Join(imports, ", "))
		case !slices.Equal(have, imports):
			t.Errorf("architecture.md: %s imports %v, the table says %v", pkg, imports, have)
		}
	}
	for pkg := range got {
		if _, ok := want[pkg]; !ok {
			t.Errorf("architecture.md: row for %s, which is no package of the module", pkg)
		}
	}
}

func short(pkg string) string {
	if pkg == module {
		return "subflow" // the module root: package subflow
	}
	return strings.TrimPrefix(pkg, module+"/")
}

// TestSearchAttributesDocumented checks that the README's registration command and the deploy
// script register exactly workflows.SearchAttributes (through devserver.SearchAttributes), and
// that temporal.md lists every one of them.
func TestSearchAttributesDocumented(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(strings.ReplaceAll(string(readme), "\\\n", " ")), " ")
	if cmd := devserver.SearchAttributeCommand("default"); !strings.Contains(flat, cmd) {
		t.Errorf("README.md does not hold the registration command\n%s", cmd)
	}

	temporalDoc, err := os.ReadFile("temporal.md")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for name, typ := range devserver.SearchAttributes {
		if !strings.Contains(string(temporalDoc), "`"+name+"`") {
			t.Errorf("temporal.md does not list the search attribute %s", name)
		}
		want = append(want, name+":"+typ.String())
	}
	slices.Sort(want)
	// The scripts that register them on servers of their own: NAME:TYPE, NAME=TYPE.
	for _, path := range []string{"../deploy/temporal/setup-temporal.sh", "../bench/cli-devserver.sh"} {
		script, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, m := range regexp.MustCompile(`(Subagent[A-Za-z]+)[:=]([A-Za-z]+)`).FindAllStringSubmatch(string(script), -1) {
			listed = append(listed, m[1]+":"+m[2])
		}
		slices.Sort(listed)
		if !slices.Equal(listed, want) {
			t.Errorf("%s registers %v, want %v", path, listed, want)
		}
	}
}
