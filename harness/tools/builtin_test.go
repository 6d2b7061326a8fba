package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture is a working directory with files, and an outside directory holding a secret that
// symlinks inside the working directory point to.
type fixture struct {
	cwd, outside string
	scope        *Scope
}

const secret = "TOP SECRET"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cwd, outside := t.TempDir(), t.TempDir()
	writeTestFile(t, filepath.Join(outside, "secret.txt"), secret+"\n")
	writeTestFile(t, filepath.Join(cwd, "notes.txt"), "alpha\nbeta\ngamma\n")
	writeTestFile(t, filepath.Join(cwd, "src", "main.go"), "package main\n\nfunc main() { println(\"beta\") }\n")
	writeTestFile(t, filepath.Join(cwd, "src", "util.txt"), "beta util\n")
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(cwd, "link_file")))
	require.NoError(t, os.Symlink(outside, filepath.Join(cwd, "link_dir")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "not-yet"), filepath.Join(cwd, "dangling")))
	require.NoError(t, os.Symlink("notes.txt", filepath.Join(cwd, "inside_link")))

	global := &Registry{}
	require.NoError(t, RegisterBuiltins(global))
	return &fixture{cwd: cwd, outside: outside, scope: NewScope(global)}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func (f *fixture) run(t *testing.T, name string, input any) Result {
	t.Helper()
	return f.runEnv(t, Env{Cwd: f.cwd}, name, input)
}

func (f *fixture) runEnv(t *testing.T, env Env, name string, input any) Result {
	t.Helper()
	raw, err := json.Marshal(input)
	require.NoError(t, err)
	return f.scope.Execute(context.Background(), env, Call{ID: "call", Name: name, Input: raw})
}

func requireOK(t *testing.T, res Result) string {
	t.Helper()
	require.False(t, res.IsError, resultText(res))
	return resultText(res)
}

func requireErr(t *testing.T, res Result, want string) {
	t.Helper()
	require.True(t, res.IsError, resultText(res))
	assert.Equal(t, want, resultText(res))
}

func TestBuiltinsAreDescribedAndMatchDefaultNames(t *testing.T) {
	var names []string
	for _, tool := range Builtins() {
		names = append(names, tool.Name)
		assert.NotEmpty(t, tool.Description, tool.Name)
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(tool.Parameters, &schema), tool.Name)
		assert.Equal(t, "object", schema.Type, tool.Name)
		assert.NotEmpty(t, schema.Properties, tool.Name)
	}
	assert.True(t, sort.StringsAreSorted(DefaultToolNames))
	assert.Equal(t, DefaultToolNames, names)
}

// escapeCases are paths every file tool must reject, with the reason each must give.
func escapeCases(f *fixture) []struct{ path, reason string } {
	return []struct{ path, reason string }{
		{"../x", "path escapes the working directory"},
		{"/etc/passwd", "absolute paths are not allowed; use a path relative to the working directory"},
		{"a/../../x", "path escapes the working directory"},
		{"link_file", fmt.Sprintf("path resolves outside the working directory (to %s) through a symlink",
			filepath.Join(f.outside, "secret.txt"))},
		{"link_dir", fmt.Sprintf("path resolves outside the working directory (to %s) through a symlink", f.outside)},
	}
}

func TestFileToolsRejectPathEscapes(t *testing.T) {
	f := newFixture(t)
	for _, tc := range escapeCases(f) {
		requireErr(t, f.run(t, "read_file", map[string]any{"path": tc.path}),
			fmt.Sprintf("Error: read_file %q: %s", tc.path, tc.reason))
		requireErr(t, f.run(t, "list_dir", map[string]any{"path": tc.path}),
			fmt.Sprintf("Error: list_dir %q: %s", tc.path, tc.reason))
		requireErr(t, f.run(t, "grep", map[string]any{"pattern": "SECRET", "path": tc.path}),
			fmt.Sprintf("Error: grep %q: %s", tc.path, tc.reason))
		requireErr(t, f.run(t, "write_file", map[string]any{"path": tc.path, "content": "pwned"}),
			fmt.Sprintf("Error: write_file %q: %s", tc.path, tc.reason))
	}
	assertOutsideUntouched(t, f)
}

func TestFileToolsRejectPathsUnderSymlinkedDirOutside(t *testing.T) {
	f := newFixture(t)
	requireErr(t, f.run(t, "read_file", map[string]any{"path": "link_dir/secret.txt"}),
		fmt.Sprintf(`Error: read_file "link_dir/secret.txt": path resolves outside the working directory (to %s) through a symlink`,
			filepath.Join(f.outside, "secret.txt")))
	for _, p := range []string{"link_dir/new.txt", "link_dir/sub/deeper/new.txt"} {
		requireErr(t, f.run(t, "write_file", map[string]any{"path": p, "content": "pwned"}),
			fmt.Sprintf("Error: write_file %q: path resolves outside the working directory (to %s) through a symlink",
				p, filepath.Join(f.outside, strings.TrimPrefix(p, "link_dir/"))))
	}
	res := f.run(t, "write_file", map[string]any{"path": "dangling", "content": "pwned"})
	require.True(t, res.IsError)
	assert.Contains(t, resultText(res), `Error: write_file "dangling": cannot resolve symlinks`)
	assertOutsideUntouched(t, f)
}

func assertOutsideUntouched(t *testing.T, f *fixture) {
	t.Helper()
	entries, err := os.ReadDir(f.outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing was created outside the cwd")
	data, err := os.ReadFile(filepath.Join(f.outside, "secret.txt"))
	require.NoError(t, err)
	assert.Equal(t, secret+"\n", string(data))
}

func TestGrepDoesNotFollowSymlinksOutOfTheCwd(t *testing.T) {
	f := newFixture(t)
	out := requireOK(t, f.run(t, "grep", map[string]any{"pattern": "."}))
	assert.NotContains(t, out, secret)
	assert.NotContains(t, out, "link_")
}

func TestSymlinkedCwdAndInsideSymlinksWork(t *testing.T) {
	f := newFixture(t)
	alias := filepath.Join(t.TempDir(), "alias")
	require.NoError(t, os.Symlink(f.cwd, alias))
	env := Env{Cwd: alias}

	assert.Equal(t, "alpha\nbeta\ngamma\n", requireOK(t, f.runEnv(t, env, "read_file", map[string]any{"path": "inside_link"})))
	requireOK(t, f.runEnv(t, env, "write_file", map[string]any{"path": "made/by/alias.txt", "content": "hi"}))
	data, err := os.ReadFile(filepath.Join(f.cwd, "made", "by", "alias.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hi", string(data))
}

func TestFileToolsNeedAbsoluteCwd(t *testing.T) {
	f := newFixture(t)
	requireErr(t, f.runEnv(t, Env{Cwd: "relative"}, "read_file", map[string]any{"path": "notes.txt"}),
		`Error: read_file: working directory "relative" is not an absolute path`)
}

func TestReadFile(t *testing.T) {
	f := newFixture(t)
	assert.Equal(t, "alpha\nbeta\ngamma\n", requireOK(t, f.run(t, "read_file", map[string]any{"path": "notes.txt"})))
	assert.Equal(t, "beta\n", requireOK(t, f.run(t, "read_file", map[string]any{"path": "notes.txt", "offset": 2, "limit": 1})))
	assert.Equal(t, "beta\ngamma\n", requireOK(t, f.run(t, "read_file", map[string]any{"path": "./src/../notes.txt", "offset": 2})))

	requireErr(t, f.run(t, "read_file", map[string]any{"path": "notes.txt", "offset": 5}),
		`Error: read_file "notes.txt": offset 5 is past the end of the file (3 lines)`)
	requireErr(t, f.run(t, "read_file", map[string]any{"path": "src"}), `Error: read_file "src": is a directory; use list_dir`)
	requireErr(t, f.run(t, "read_file", map[string]any{"path": "nope.txt"}), `Error: read_file "nope.txt": no such file or directory`)
	requireErr(t, f.run(t, "read_file", map[string]any{}), `Error: invalid arguments: read_file: path is required`)
	requireErr(t, f.run(t, "read_file", map[string]any{"path": "notes.txt", "lines": 3}),
		`Error: invalid arguments: read_file: json: unknown field "lines"`)

	writeTestFile(t, filepath.Join(f.cwd, "empty.txt"), "")
	assert.Equal(t, "(empty file)", requireOK(t, f.run(t, "read_file", map[string]any{"path": "empty.txt"})))
	writeTestFile(t, filepath.Join(f.cwd, "blob.bin"), "MZ\x00\x01\x02")
	requireErr(t, f.run(t, "read_file", map[string]any{"path": "blob.bin"}), `Error: read_file "blob.bin": is a binary file, not text`)
}

func TestReadFileCapsOutput(t *testing.T) {
	f := newFixture(t)
	line := strings.Repeat("x", 1023) + "\n" // 1 KiB per line
	writeTestFile(t, filepath.Join(f.cwd, "big.txt"), strings.Repeat(line, 300))

	out := requireOK(t, f.run(t, "read_file", map[string]any{"path": "big.txt"}))
	assert.Equal(t, strings.Repeat(line, 256)+"\n[truncated: output is capped at 262144 bytes; continue with offset=257]", out)
	out = requireOK(t, f.run(t, "read_file", map[string]any{"path": "big.txt", "offset": 257}))
	assert.Equal(t, strings.Repeat(line, 44), out)

	// One line longer than the cap is cut short, on a rune boundary.
	writeTestFile(t, filepath.Join(f.cwd, "oneline.txt"), "é"+strings.Repeat("é", ReadFileMaxBytes)+"\nnext\n")
	out = requireOK(t, f.run(t, "read_file", map[string]any{"path": "oneline.txt"}))
	text, note, ok := strings.Cut(out, "\n[truncated")
	require.True(t, ok)
	assert.Len(t, text, ReadFileMaxBytes)
	assert.Equal(t, ": output is capped at 262144 bytes; line 1 was cut short, continue with offset=2]", note)
	assert.Equal(t, "next\n", requireOK(t, f.run(t, "read_file", map[string]any{"path": "oneline.txt", "offset": 2})))
}

func TestListDir(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.Mkdir(filepath.Join(f.cwd, "empty"), 0o755))
	want := "dangling\nempty/\ninside_link\nlink_dir\nlink_file\nnotes.txt\nsrc/"
	assert.Equal(t, want, requireOK(t, f.run(t, "list_dir", map[string]any{})))
	assert.Equal(t, want, requireOK(t, f.run(t, "list_dir", map[string]any{"path": "."})))
	assert.Equal(t, "main.go\nutil.txt", requireOK(t, f.run(t, "list_dir", map[string]any{"path": "src"})))
	assert.Equal(t, "(empty directory)", requireOK(t, f.run(t, "list_dir", map[string]any{"path": "empty"})))
	requireErr(t, f.run(t, "list_dir", map[string]any{"path": "notes.txt"}), `Error: list_dir "notes.txt": is not a directory; use read_file`)
}

func TestGrep(t *testing.T) {
	f := newFixture(t)
	writeTestFile(t, filepath.Join(f.cwd, ".git", "HEAD"), "beta in git\n")
	writeTestFile(t, filepath.Join(f.cwd, "blob.bin"), "beta\x00")

	assert.Equal(t, "notes.txt:2:beta\nsrc/main.go:3:func main() { println(\"beta\") }\nsrc/util.txt:1:beta util",
		requireOK(t, f.run(t, "grep", map[string]any{"pattern": "beta"})))
	assert.Equal(t, "src/main.go:3:func main() { println(\"beta\") }",
		requireOK(t, f.run(t, "grep", map[string]any{"pattern": `b\w+a`, "glob": "*.go"})))
	assert.Equal(t, "src/util.txt:1:beta util",
		requireOK(t, f.run(t, "grep", map[string]any{"pattern": "^beta", "path": "src"})))
	assert.Equal(t, "notes.txt:1:alpha\nnotes.txt:3:gamma",
		requireOK(t, f.run(t, "grep", map[string]any{"pattern": "ph|mm", "path": "notes.txt", "glob": "*.go"})))
	assert.Equal(t, "no matches", requireOK(t, f.run(t, "grep", map[string]any{"pattern": "zeta"})))

	requireErr(t, f.run(t, "grep", map[string]any{"pattern": "("}),
		"Error: invalid arguments: grep: pattern \"(\": error parsing regexp: missing closing ): `(`")
	requireErr(t, f.run(t, "grep", map[string]any{"pattern": "x", "glob": "["}),
		`Error: invalid arguments: grep: glob "[": syntax error in pattern`)
	requireErr(t, f.run(t, "grep", map[string]any{"pattern": "x", "path": "missing"}),
		`Error: grep "missing": no such file or directory`)
}

func TestGrepCapsMatches(t *testing.T) {
	f := newFixture(t)
	writeTestFile(t, filepath.Join(f.cwd, "many.txt"), strings.Repeat("hit\n", GrepMaxMatches+10))
	out := requireOK(t, f.run(t, "grep", map[string]any{"pattern": "hit", "path": "many.txt"}))
	lines := strings.Split(out, "\n")
	require.Len(t, lines, GrepMaxMatches+1)
	assert.Equal(t, fmt.Sprintf("many.txt:%d:hit", GrepMaxMatches), lines[GrepMaxMatches-1])
	assert.Equal(t, "[truncated: showing the first 200 matches; narrow the pattern, path or glob]", lines[GrepMaxMatches])
}

func TestWriteFile(t *testing.T) {
	f := newFixture(t)
	assert.Equal(t, "wrote 5 bytes to deep/er/new.txt",
		requireOK(t, f.run(t, "write_file", map[string]any{"path": "deep/er/new.txt", "content": "hello"})))
	data, err := os.ReadFile(filepath.Join(f.cwd, "deep", "er", "new.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello", string(data))

	requireOK(t, f.run(t, "write_file", map[string]any{"path": "notes.txt", "content": ""}))
	data, err = os.ReadFile(filepath.Join(f.cwd, "notes.txt"))
	require.NoError(t, err)
	assert.Empty(t, data)

	requireErr(t, f.run(t, "write_file", map[string]any{"path": "x.txt"}), `Error: invalid arguments: write_file: content is required`)
	requireErr(t, f.run(t, "write_file", map[string]any{"path": "src", "content": "x"}), `Error: write_file "src": is a directory`)
}

func TestWriteFileInReadOnlySandboxIsRejected(t *testing.T) {
	f := newFixture(t)
	env := Env{Cwd: f.cwd, SandboxMode: SandboxReadOnly, ApprovalPolicy: ApprovalNever}
	requireErr(t, f.runEnv(t, env, "write_file", map[string]any{"path": "new.txt", "content": "x"}),
		`Error: write_file needs approval while the sandbox is read-only; it was rejected automatically because no approver is available (approval policy "never")`)
	assert.NoFileExists(t, filepath.Join(f.cwd, "new.txt"))

	// Reading stays allowed.
	requireOK(t, f.runEnv(t, env, "read_file", map[string]any{"path": "notes.txt"}))
}

func TestUnknownSandboxModeNeverAllowsWrites(t *testing.T) {
	f := newFixture(t)
	for _, mode := range []string{"Read-Only", "READ-ONLY", "readonly", "bogus"} {
		env := Env{Cwd: f.cwd, SandboxMode: mode}
		res := f.runEnv(t, env, "write_file", map[string]any{"path": "new.txt", "content": "x"})
		require.True(t, res.IsError, mode)
		assert.NoFileExists(t, filepath.Join(f.cwd, "new.txt"), mode)
		assert.EqualError(t, CheckSandboxMode(mode),
			fmt.Sprintf("unknown sandbox mode %q; known modes: read-only, workspace-write", mode))
	}
	requireOK(t, f.runEnv(t, Env{Cwd: f.cwd, SandboxMode: SandboxWorkspaceWrite}, "write_file",
		map[string]any{"path": "new.txt", "content": "x"}))
	assert.NoError(t, CheckSandboxMode(""))
	assert.NoError(t, CheckSandboxMode(SandboxReadOnly))
}
