package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longPath is a path of n components that does not exist (the worst case of resolution,
// which walks up to the longest existing prefix).
func longPath(n int) string { return strings.Repeat("a/", n-1) + "a" }

func TestFileToolsRefuseOverlongPaths(t *testing.T) {
	f := newFixture(t)
	huge := longPath(64000)
	deep := longPath(MaxPathParts + 1)
	long := strings.Repeat("x", MaxPathBytes+1)
	for tool, input := range map[string]map[string]any{
		"read_file":  {"path": huge},
		"write_file": {"path": huge, "content": "x"},
		"list_dir":   {"path": huge},
		"grep":       {"path": huge, "pattern": "x"},
	} {
		res := f.run(t, tool, input)
		require.True(t, res.IsError, tool)
		assert.Contains(t, resultText(res), fmt.Sprintf("path is longer than %d bytes", MaxPathBytes), tool)
	}
	res := f.run(t, "read_file", map[string]any{"path": deep})
	assert.Contains(t, resultText(res), fmt.Sprintf("path has %d components, more than %d", MaxPathParts+1, MaxPathParts))
	res = f.run(t, "read_file", map[string]any{"path": long})
	assert.Contains(t, resultText(res), "path is longer than")
	_, err := os.Stat(filepath.Join(f.cwd, "a"))
	assert.ErrorIs(t, err, os.ErrNotExist, "write_file created nothing")
}

// BenchmarkResolveLongPath measures what a path at the limits costs, and what a 64,000-part
// path costs now that it is refused before any system call.
func BenchmarkResolveLongPath(b *testing.B) {
	cwd := b.TempDir()
	for _, c := range []struct {
		name string
		path string
	}{
		{"parts=256", longPath(MaxPathParts)},
		{"parts=64000", longPath(64000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			w, err := openWorkspace(context.Background(), "read_file", Env{Cwd: cwd})
			require.NoError(b, err)
			defer w.Close()
			for b.Loop() {
				_, _ = w.resolve(c.path)
			}
		})
	}
}

func TestWriteFileSizeLimit(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "write_file", map[string]any{"path": "big.txt", "content": strings.Repeat("x", WriteFileMaxBytes+1)})
	requireErr(t, res, fmt.Sprintf(`Error: write_file "big.txt": content is %d bytes, more than the limit of %d bytes per call`,
		WriteFileMaxBytes+1, WriteFileMaxBytes))
	_, err := os.Stat(filepath.Join(f.cwd, "big.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	requireOK(t, f.run(t, "write_file", map[string]any{"path": "max.txt", "content": strings.Repeat("x", WriteFileMaxBytes)}))
}

// TestFileToolsRefuseFIFOs: a FIFO nobody writes to would block an open or a read forever.
// Each call must return (the test would hang otherwise) with an error naming the FIFO.
func TestFileToolsRefuseFIFOs(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(f.cwd, "pipe"), 0o644))
	requireErr(t, f.run(t, "read_file", map[string]any{"path": "pipe"}),
		`Error: read_file "pipe": is a named pipe (FIFO), not a regular file`)
	requireErr(t, f.run(t, "write_file", map[string]any{"path": "pipe", "content": "x"}),
		`Error: write_file "pipe": is a named pipe (FIFO), not a regular file`)
	requireErr(t, f.run(t, "list_dir", map[string]any{"path": "pipe"}),
		`Error: list_dir "pipe": is not a directory; use read_file`)
	assert.Equal(t, "no matches", requireOK(t, f.run(t, "grep", map[string]any{"pattern": "x", "path": "pipe"})))
	assert.Contains(t, requireOK(t, f.run(t, "grep", map[string]any{"pattern": "beta"})), "notes.txt:2:beta")
}

// TestFileToolsRefuseDevices reads /dev/zero with /dev as the cwd (a device inside a temporary
// directory cannot be made without privileges): it would never end.
func TestFileToolsRefuseDevices(t *testing.T) {
	f := newFixture(t)
	requireErr(t, f.runEnv(t, Env{Cwd: "/dev"}, "read_file", map[string]any{"path": "zero"}),
		`Error: read_file "zero": is a device, not a regular file`)
}

func TestFileToolsHonourCancellation(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for tool, input := range map[string]any{
		"read_file":  map[string]any{"path": "notes.txt"},
		"write_file": map[string]any{"path": "new.txt", "content": "x"},
		"list_dir":   map[string]any{},
		"grep":       map[string]any{"pattern": "beta"},
	} {
		raw, err := json.Marshal(input)
		require.NoError(t, err)
		res := f.scope.Execute(ctx, Env{Cwd: f.cwd}, Call{ID: "c", Name: tool, Input: raw})
		require.True(t, res.IsError, tool)
		assert.Contains(t, resultText(res), context.Canceled.Error(), tool)
	}
	_, err := os.Stat(filepath.Join(f.cwd, "new.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestFileToolsRefuseProtectedDirs(t *testing.T) {
	f := newFixture(t)
	store := filepath.Join(f.cwd, "state", "sessions")
	writeTestFile(t, filepath.Join(store, "other-run.jsonl"), "beta transcript\n")
	env := Env{Cwd: f.cwd, Protected: []string{store}}
	const refused = "is inside a session store, which the file tools cannot access"
	for _, c := range []struct{ tool, path string }{
		{"read_file", "state/sessions/other-run.jsonl"},
		{"list_dir", "state/sessions"},
		{"grep", "state/sessions"},
		{"write_file", "state/sessions/other-run.jsonl"},
	} {
		input := map[string]any{"path": c.path}
		switch c.tool {
		case "grep":
			input["pattern"] = "beta"
		case "write_file":
			input["content"] = "overwritten"
		}
		res := f.runEnv(t, env, c.tool, input)
		require.True(t, res.IsError, c.tool)
		assert.Contains(t, resultText(res), refused, c.tool)
	}
	// A walk from above skips it; a cwd inside it is refused too.
	out := requireOK(t, f.runEnv(t, env, "grep", map[string]any{"pattern": "beta"}))
	assert.NotContains(t, out, "other-run")
	res := f.runEnv(t, Env{Cwd: store, Protected: []string{store}}, "list_dir", map[string]any{})
	assert.Contains(t, resultText(res), refused)
	data, err := os.ReadFile(filepath.Join(store, "other-run.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, "beta transcript\n", string(data))
}

// TestFileToolsRefuseACwdOutsideTheRoots: with workspace roots set, a cwd that resolves
// outside them — a symlink under a root pointing out of it — is refused to every file tool
// (docs/deployment.md), and a cwd under a root works.
func TestFileToolsRefuseACwdOutsideTheRoots(t *testing.T) {
	f := newFixture(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	writeTestFile(t, filepath.Join(f.cwd, "secret.txt"), "outside\n")
	require.NoError(t, os.Symlink(f.cwd, filepath.Join(root, "link")))
	env := Env{Cwd: filepath.Join(root, "link"), Roots: []string{root}}
	for tool, input := range map[string]map[string]any{
		"read_file":  {"path": "secret.txt"},
		"list_dir":   {},
		"grep":       {"pattern": "outside"},
		"write_file": {"path": "secret.txt", "content": "overwritten"},
	} {
		res := f.runEnv(t, env, tool, input)
		require.True(t, res.IsError, tool)
		assert.Contains(t, resultText(res), "outside the workspace roots this worker serves ("+root+")", tool)
	}
	writeTestFile(t, filepath.Join(root, "in.txt"), "inside\n")
	assert.Contains(t, requireOK(t, f.runEnv(t, Env{Cwd: root, Roots: []string{root}}, "read_file", map[string]any{"path": "in.txt"})), "inside")
	data, err := os.ReadFile(filepath.Join(f.cwd, "secret.txt"))
	require.NoError(t, err)
	assert.Equal(t, "outside\n", string(data))
}
