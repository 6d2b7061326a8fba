package subagent

import (
	"os"
	"path/filepath"
)

// CwdOptions are the inputs of ResolveCwd.
type CwdOptions struct {
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

// ResolveCwd chooses a child's working directory (SPEC R-51): the configured cwd (a
// relative one resolved against ProcessCwd) wins, else the parent session's cwd; never the
// process's own cwd. The chosen path must be absolute and an accessible directory.
// ResolveCwd returns it cleaned, with symlinks resolved. Every failure is a
// *ValidationError whose message starts with `<Prefix>: `.
func ResolveCwd(opts CwdOptions) (string, error) {
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
		return "", invalid(RuleEmptyCwd, "%s: %s must not be empty — omit the key to inherit the %s",
			opts.Prefix, configLabel, parentLabel)
	case opts.ConfigCwd != nil:
		cwd, label = *opts.ConfigCwd, configLabel
		if !filepath.IsAbs(cwd) && opts.ProcessCwd != "" {
			cwd = filepath.Join(opts.ProcessCwd, cwd)
		}
	case opts.ParentCwd != "":
		cwd, label = opts.ParentCwd, parentLabel
	default:
		return "", invalid(RuleMissingCwd,
			"%s: no working directory for the child — configure `cwd` or delegate from a parent session that has one",
			opts.Prefix)
	}
	if !filepath.IsAbs(cwd) {
		return "", invalid(RuleRelativeCwd, "%s: %s must be an absolute path: %s", opts.Prefix, label, cwd)
	}
	cwd = filepath.Clean(cwd)
	info, err := os.Stat(cwd)
	if err != nil || !info.IsDir() {
		return "", invalid(RuleInaccessibleCwd, "%s: %s is not an accessible directory: %s", opts.Prefix, label, cwd)
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return "", invalid(RuleInaccessibleCwd, "%s: %s is not an accessible directory: %s", opts.Prefix, label, cwd)
	}
	return real, nil
}
