package activities_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/worker/app"
)

// The outside file a workspace name links to, in the hard-link tests.
const outsideSecret = "OUTSIDE SECRET\n"

// hardLinkScript reads, greps and lists the workspace holding hard.txt, a hard link to a
// file outside it, then writes hard.txt, then answers.
var hardLinkScript = []string{
	`{"toolCalls": [
		{"name": "read_file", "input": {"path": "hard.txt"}},
		{"name": "grep", "input": {"pattern": "SECRET"}},
		{"name": "list_dir", "input": {}}]}`,
	`{"toolCalls": [{"name": "write_file", "input": {"path": "hard.txt", "content": "mine now\n"}}]}`,
	`{"text": "done"}`,
}

// TestChildrenNeitherReadNorWriteThroughAHardLink: an in-process and an sdk child whose cwd
// holds a hard link to a file outside it get no byte of that file from read_file, grep or
// list_dir, and their write_file replaces the workspace's name: the outside inode keeps its
// bytes. Under a root the worker declares trusted (Config.HardLinkRoots) the file reads as
// any other, in both: the declaration reaches the sdk child in initialize.
func TestChildrenNeitherReadNorWriteThroughAHardLink(t *testing.T) {
	for _, provider := range []string{"spawn", "sdk"} {
		for _, trusted := range []bool{false, true} {
			name := provider
			if trusted {
				name += " trusted"
			}
			t.Run(name, func(t *testing.T) {
				f := newFixture(t, hardLinkScript...)
				outside := filepath.Join(t.TempDir(), "secret.txt")
				require.NoError(t, os.WriteFile(outside, []byte(outsideSecret), 0o600))
				require.NoError(t, os.Link(outside, filepath.Join(f.cwd, "hard.txt")))
				ino := inodeOf(t, outside)
				sdkRoot := t.TempDir()
				a := f.activities(func(c *activities.Config) {
					c.SDK.Args = []string{app.ChildRuntimeArg, "--session-root", sdkRoot}
					if trusted {
						root, err := filepath.EvalSymlinks(filepath.Dir(f.cwd))
						require.NoError(t, err)
						c.WorkspaceRoots, c.HardLinkRoots = []string{root}, []string{root}
					}
				})
				activities.SetSignal(a, (&signals{}).record)
				e := newEnv(t, a, worker.Options{})

				var events []session.Event
				if provider == "sdk" {
					_, err := runSDK(e, "run-1", request("look"))
					require.NoError(t, err)
					store, err := filestore.New(sdkRoot)
					require.NoError(t, err)
					defer store.Close()
					_, events, err = store.Load(context.Background(), "run-1")
					require.NoError(t, err)
				} else {
					publish(t, e, "child-1", request("look"))
					_, err := drive(e, "child-1", request("look"))
					require.NoError(t, err)
					events = f.events("child-1")
				}
				results := toolResults(t, events)
				require.Len(t, results, 4)

				data, err := os.ReadFile(outside)
				require.NoError(t, err)
				assert.Equal(t, outsideSecret, string(data), "the outside file's bytes are unchanged")
				assert.Equal(t, ino, inodeOf(t, outside), "and so is its inode")
				got, err := os.ReadFile(filepath.Join(f.cwd, "hard.txt"))
				require.NoError(t, err)
				assert.Equal(t, "mine now\n", string(got), "the write replaced the workspace's name")
				assert.False(t, results[3].IsError, session.JoinText(results[3].Content))

				read, grep, list := session.JoinText(results[0].Content), session.JoinText(results[1].Content), session.JoinText(results[2].Content)
				if trusted {
					assert.Equal(t, outsideSecret, read)
					assert.Contains(t, grep, "hard.txt:1:OUTSIDE SECRET")
					assert.Contains(t, strings.Split(list, "\n"), "hard.txt")
					return
				}
				assert.True(t, results[0].IsError)
				assert.Contains(t, read, `read_file "hard.txt": has 2 hard links`)
				assert.Contains(t, grep, "[skipped 1 files with more than one hard link")
				assert.Contains(t, strings.Split(list, "\n"), "hard.txt [more than one hard link: not readable]")
				for i, r := range results {
					assert.NotContains(t, session.JoinText(r.Content), "OUTSIDE SECRET", "tool result %d", i)
				}
			})
		}
	}
}

// toolResults returns the tool results of a transcript, in order.
func toolResults(t *testing.T, events []session.Event) []session.ToolResultData {
	t.Helper()
	var out []session.ToolResultData
	for _, ev := range events {
		if ev.Type == session.TypeToolResult {
			var r session.ToolResultData
			require.NoError(t, ev.Decode(&r))
			out = append(out, r)
		}
	}
	return out
}

// inodeOf returns the inode number of path.
func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	return uint64(info.Sys().(*syscall.Stat_t).Ino)
}
