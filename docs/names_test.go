package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// userDocs are the markdown files of the user documentation, relative to the repository root.
func userDocs(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md", "workflows/testdata/README.md"}
	for _, pattern := range []string{"docs/*.md", "examples/*/README*.md"} {
		m, err := filepath.Glob("../" + pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			files = append(files, strings.TrimPrefix(f, "../"))
		}
	}
	return files
}

// codeSpans returns the text of the `code` spans of a markdown document, a span broken over
// two lines joined with a space, and fenced blocks left out.
func codeSpans(doc string) []string {
	doc = regexp.MustCompile("(?ms)^```.*?^```").ReplaceAllString(doc, "")
	var spans []string
	for _, m := range regexp.MustCompile("``(.+?)``|`([^`]+)`").FindAllStringSubmatch(doc, -1) {
		s := m[1] + m[2]
		spans = append(spans, strings.Join(strings.Fields(s), " "))
	}
	return spans
}

// repoPath matches a code span that names a file or folder of the repository by its path from
// the root: it starts with one of the folders that hold code, scripts or documents.
var repoPath = regexp.MustCompile(`^(\.ci|bench|deploy|devserver|docs|examples|harness|internal|starter|test|worker|workflows)/[A-Za-z0-9_./…-]*$`)

// goIdent matches a path that ends in a Go identifier of the package there.
var goIdent = regexp.MustCompile(`^(.*)\.[A-Z][A-Za-z0-9]*$`)

// TestDocsNameExistingPaths keeps the documentation's file and package names in step with a
// moving tree: every code span that names a path of the repository (`internal/wire`,
// `workflows/options.go`) names one that exists, and every "package `X`" names a folder of Go
// code (or the module root, package `subflow`).
func TestDocsNameExistingPaths(t *testing.T) {
	pkg := regexp.MustCompile("(?i)\\bpackages? `([a-z0-9/._-]+)`")
	for _, file := range userDocs(t) {
		data, err := os.ReadFile("../" + file)
		if err != nil {
			t.Fatal(err)
		}
		for _, span := range codeSpans(string(data)) {
			if !repoPath.MatchString(span) {
				continue
			}
			path := strings.TrimRight(span, "/…")
			if m := goIdent.FindStringSubmatch(path); m != nil {
				path = m[1] // `worker/app.Main`: the package's folder
			}
			if _, err := os.Stat("../" + path); err != nil {
				t.Errorf("%s names `%s`, which is not in the repository", file, span)
			}
		}
		for _, m := range pkg.FindAllStringSubmatch(strings.Join(strings.Fields(string(data)), " "), -1) {
			if m[1] == "subflow" {
				continue
			}
			if !hasGoCode("../" + m[1]) {
				t.Errorf("%s names package `%s`, which is no folder of Go code of the repository", file, m[1])
			}
		}
	}
}

// hasGoCode reports whether dir holds a Go file that is not a test.
func hasGoCode(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			return true
		}
	}
	return false
}

// identPackages are the folders of the packages the documentation names identifiers of, as
// `workflows.HeartbeatTimeout` or `subflow.Start`, by the package's name.
var identPackages = map[string]string{
	"subflow":    "..",
	"workflows":  "../workflows",
	"subagent":   "../subagent",
	"session":    "../harness/session",
	"app":        "../worker/app",
	"devserver":  "../devserver",
	"replaytest": "../workflows/replaytest",
}

// TestDocsNameExistingIdentifiers checks that every `pkg.Name` of the documentation, for the
// packages of identPackages, is a top-level declaration of that package (a renamed or removed
// function, type, constant or variable fails here).
func TestDocsNameExistingIdentifiers(t *testing.T) {
	declared := map[string]map[string]bool{}
	for name, dir := range identPackages {
		declared[name] = topLevelNames(t, dir)
	}
	ident := regexp.MustCompile(`^\*?([a-z]+)\.([A-Z][A-Za-z0-9]*)`)
	for _, file := range userDocs(t) {
		data, err := os.ReadFile("../" + file)
		if err != nil {
			t.Fatal(err)
		}
		for _, span := range codeSpans(string(data)) {
			m := ident.FindStringSubmatch(span)
			if m == nil || declared[m[1]] == nil {
				continue
			}
			if !declared[m[1]][m[2]] {
				t.Errorf("%s names `%s`: package %s declares no %s", file, span, m[1], m[2])
			}
		}
	}
}

// topLevelNames returns the names of the top-level declarations of the Go files of dir,
// tests aside.
func topLevelNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}
