package workdir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/subagent"
)

func TestResolve(t *testing.T) {
	// EvalSymlinks: the temp dir itself may sit behind a symlink (macOS /var → /private/var).
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	work := filepath.Join(root, "work")
	parent := filepath.Join(root, "parent")
	require.NoError(t, os.Mkdir(work, 0o755))
	require.NoError(t, os.Mkdir(parent, 0o755))
	require.NoError(t, os.Symlink(work, filepath.Join(root, "link")))
	file := filepath.Join(root, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	missing := filepath.Join(root, "missing")

	const p = "subagent-dsh-sdk"
	tests := []struct {
		name string
		opts Options
		want string
		rule string
		msg  string
	}{
		{name: "config cwd wins", opts: Options{ConfigCwd: new(work), ParentCwd: parent}, want: work},
		{name: "parent cwd when no config", opts: Options{ParentCwd: parent, ProcessCwd: work}, want: parent},
		{name: "relative config resolves against the process cwd",
			opts: Options{ConfigCwd: new("../work"), ProcessCwd: parent}, want: work},
		{name: "path is cleaned", opts: Options{ParentCwd: work + "/./"}, want: work},
		{name: "symlinks are resolved", opts: Options{ConfigCwd: new(filepath.Join(root, "link"))}, want: work},
		{name: "empty config cwd", opts: Options{ConfigCwd: new(""), ParentCwd: parent}, rule: subagent.RuleEmptyCwd,
			msg: p + ": config cwd must not be empty — omit the key to inherit the parent session cwd"},
		{name: "no cwd at all, never the process cwd", opts: Options{ProcessCwd: work}, rule: subagent.RuleMissingCwd,
			msg: p + ": no working directory for the child — configure `cwd` or delegate from a parent session that has one"},
		{name: "relative config without a process cwd", opts: Options{ConfigCwd: new("work")}, rule: subagent.RuleRelativeCwd,
			msg: p + ": config cwd must be an absolute path: work"},
		{name: "relative parent cwd", opts: Options{ParentCwd: "rel/dir", ProcessCwd: root}, rule: subagent.RuleRelativeCwd,
			msg: p + ": parent session cwd must be an absolute path: rel/dir"},
		{name: "missing config dir", opts: Options{ConfigCwd: new(missing)}, rule: subagent.RuleInaccessibleCwd,
			msg: p + ": config cwd is not an accessible directory: " + missing},
		{name: "parent cwd is a file", opts: Options{ParentCwd: file}, rule: subagent.RuleInaccessibleCwd,
			msg: p + ": parent session cwd is not an accessible directory: " + file},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Prefix = p
			got, err := Resolve(tt.opts)
			if tt.msg == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.EqualError(t, err, tt.msg)
			var ve *subagent.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tt.rule, ve.Rule)
		})
	}
}

func TestResolveCustomLabels(t *testing.T) {
	_, err := Resolve(Options{Prefix: "worker", ConfigCwd: new(""), ConfigLabel: "--cwd", ParentLabel: "parent cwd"})
	require.EqualError(t, err, "worker: --cwd must not be empty — omit the key to inherit the parent cwd")
	_, err = Resolve(Options{Prefix: "worker", ParentCwd: "x", ParentLabel: "parent cwd"})
	require.EqualError(t, err, "worker: parent cwd must be an absolute path: x")
}
