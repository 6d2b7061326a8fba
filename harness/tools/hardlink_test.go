package tools

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linkFixture is a fixture whose working directory holds hard.txt, a hard link to the
// outside secret (as `ln outside/secret.txt cwd/hard.txt` makes it).
func linkFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t)
	outside := filepath.Join(f.outside, "secret.txt")
	require.NoError(t, os.Link(outside, filepath.Join(f.cwd, "hard.txt")))
	return f, outside
}

// inode returns the inode number and the link count of path.
func inode(t *testing.T, path string) (ino, nlink uint64) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	st := info.Sys().(*syscall.Stat_t)
	return uint64(st.Ino), uint64(st.Nlink)
}

// TestHardLinkOutOfTheWorkspaceIsNeitherReadNorWritten: read_file refuses a file with two
// hard links, grep skips it (and refuses it when asked for by name), list_dir marks it, and
// none of them shows a byte of it; write_file replaces the name, so the outside inode keeps
// its bytes and loses only the workspace's link.
func TestHardLinkOutOfTheWorkspaceIsNeitherReadNorWritten(t *testing.T) {
	f, outside := linkFixture(t)
	ino, nlink := inode(t, outside)
	require.EqualValues(t, 2, nlink)

	r := f.run(t, "read_file", map[string]any{"path": "hard.txt"})
	assert.True(t, r.IsError)
	assert.Equal(t, `Error: read_file "hard.txt": has 2 hard links, so it may be a file outside the working directory; the file tools do not read it `+
		`(an operator may declare a workspace root's hard links trusted: worker --workspace-root trust-hardlinks:DIR)`, resultText(r))

	r = f.run(t, "grep", map[string]any{"pattern": "SECRET"})
	assert.False(t, r.IsError, resultText(r))
	assert.Equal(t, "no matches\n[skipped 1 files with more than one hard link: they may be files outside the working directory]", resultText(r))
	r = f.run(t, "grep", map[string]any{"pattern": "SECRET", "path": "hard.txt"})
	assert.True(t, r.IsError)
	assert.Contains(t, resultText(r), `grep "hard.txt": has 2 hard links`)
	assert.NotContains(t, resultText(r), secret)

	r = f.run(t, "list_dir", map[string]any{})
	assert.Contains(t, strings.Split(resultText(r), "\n"), "hard.txt [more than one hard link: not readable]")
	assert.Contains(t, strings.Split(resultText(r), "\n"), "notes.txt", "a file with one link is listed as it is")

	r = f.run(t, "write_file", map[string]any{"path": "hard.txt", "content": "mine now\n"})
	require.False(t, r.IsError, resultText(r))
	data, err := os.ReadFile(outside)
	require.NoError(t, err)
	assert.Equal(t, secret+"\n", string(data), "the outside file's bytes are unchanged")
	gotIno, gotLinks := inode(t, outside)
	assert.Equal(t, ino, gotIno)
	assert.EqualValues(t, 1, gotLinks, "the workspace's name no longer links to it")
	wsIno, _ := inode(t, filepath.Join(f.cwd, "hard.txt"))
	assert.NotEqual(t, ino, wsIno)
	r = f.run(t, "read_file", map[string]any{"path": "hard.txt"})
	assert.Equal(t, "mine now\n", resultText(r), "the workspace's own file, readable: one link")
}

// TestHardLinksOfATrustedRoot: under a root whose hard links the operator trusts
// (Env.HardLinkRoots), a file with several links is read and searched like any other.
func TestHardLinksOfATrustedRoot(t *testing.T) {
	f, _ := linkFixture(t)
	real, err := filepath.EvalSymlinks(f.cwd)
	require.NoError(t, err)
	env := Env{Cwd: f.cwd, Roots: []string{filepath.Dir(real)}, HardLinkRoots: []string{filepath.Dir(real)}}
	r := f.runEnv(t, env, "read_file", map[string]any{"path": "hard.txt"})
	assert.Equal(t, secret+"\n", resultText(r))
	r = f.runEnv(t, env, "grep", map[string]any{"pattern": "SECRET"})
	assert.Equal(t, "hard.txt:1:"+secret, resultText(r))
	r = f.runEnv(t, env, "list_dir", map[string]any{})
	assert.Contains(t, strings.Split(resultText(r), "\n"), "hard.txt")

	// Another root's trust does not reach this cwd.
	env.HardLinkRoots = []string{t.TempDir()}
	r = f.runEnv(t, env, "read_file", map[string]any{"path": "hard.txt"})
	assert.True(t, r.IsError)
}

// TestWriteFileReplacesTheName: write_file keeps an existing file's permission bits, leaves
// no temporary file behind, and refuses to replace a directory.
func TestWriteFileReplacesTheName(t *testing.T) {
	f := newFixture(t)
	script := filepath.Join(f.cwd, "run.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Chmod(script, 0o755))
	r := f.run(t, "write_file", map[string]any{"path": "run.sh", "content": "#!/bin/sh\necho hi\n"})
	require.False(t, r.IsError, resultText(r))
	info, err := os.Stat(script)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), info.Mode().Perm())
	entries, err := os.ReadDir(f.cwd)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.Contains(e.Name(), ".subflow-"), "temporary file left: %s", e.Name())
	}
	r = f.run(t, "write_file", map[string]any{"path": "src", "content": "x"})
	assert.Equal(t, `Error: write_file "src": is a directory`, resultText(r))
}
