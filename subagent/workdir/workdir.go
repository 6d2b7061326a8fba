package workdir

import (
	"os"
	"path/filepath"

	"github.com/subflow-dev/subflow/subagent"
)

// Options are the inputs of Resolve.
type Options struct {
	// Prefix starts every message, e.g. "subagent-dsh-sdk".
	Prefix string
	// ConfigCwd is the configured cwd; nil when the key is absent.
	ConfigCwd *string
	// ProcessCwd resolves a relative ConfigCwd (the caller's os.Getwd()). It is never used
	// as a fallback for the child's cwd.
	ProcessCwd string
	// ParentCwd is the delegating parent session's cwd; "" when there is none.
	ParentCwd string
	// ConfigLabel and ParentLabel name the two sources in messages; they default to
	// "config cwd" and "parent session cwd".
	ConfigLabel string
	ParentLabel string
}

// Resolve chooses a child's working directory (contract R-51): the configured cwd (a
// relative one resolved against ProcessCwd) wins, else the parent session's cwd; never the
// process's own cwd. The chosen path must be absolute and an accessible directory.
// Resolve returns it cleaned, with symlinks resolved. Every failure is a
// *subagent.ValidationError whose message starts with `<Prefix>: `.
func Resolve(opts Options) (string, error) {
	configLabel, parentLabel := opts.ConfigLabel, opts.ParentLabel
	if configLabel == "" {
		configLabel = "config cwd"
	}
	if parentLabel == "" {
		parentLabel = "parent session cwd"
	}
	var cwd, label string
	switch {
	case opts.ConfigCwd != nil && *opts.ConfigCwd == "":
		return "", subagent.Rejectf(subagent.RuleEmptyCwd, "%s: %s must not be empty — omit the key to inherit the %s",
			opts.Prefix, configLabel, parentLabel)
	case opts.ConfigCwd != nil:
		cwd, label = *opts.ConfigCwd, configLabel
		if !filepath.IsAbs(cwd) && opts.ProcessCwd != "" {
			cwd = filepath.Join(opts.ProcessCwd, cwd)
		}
	case opts.ParentCwd != "":
		cwd, label = opts.ParentCwd, parentLabel
	default:
		return "", subagent.Rejectf(subagent.RuleMissingCwd,
			"%s: no working directory for the child — configure `cwd` or delegate from a parent session that has one",
			opts.Prefix)
	}
	if !filepath.IsAbs(cwd) {
		return "", subagent.Rejectf(subagent.RuleRelativeCwd, "%s: %s must be an absolute path: %s", opts.Prefix, label, cwd)
	}
	cwd = filepath.Clean(cwd)
	info, err := os.Stat(cwd)
	if err != nil || !info.IsDir() {
		return "", subagent.Rejectf(subagent.RuleInaccessibleCwd, "%s: %s is not an accessible directory: %s", opts.Prefix, label, cwd)
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return "", subagent.Rejectf(subagent.RuleInaccessibleCwd, "%s: %s is not an accessible directory: %s", opts.Prefix, label, cwd)
	}
	return real, nil
}
