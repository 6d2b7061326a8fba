package subagent

import (
	"slices"
	"strings"
)

// secretMarkers drop every variable whose name contains one of them, case-insensitively.
var secretMarkers = []string{"KEY", "PASSWORD", "SECRET", "TOKEN"}

// ScrubEnv returns a child process's environment (SPEC R-53): environ (NAME=value entries,
// as from os.Environ) without the variables whose name contains KEY, PASSWORD, SECRET or
// TOKEN, or starts with dropPrefix (both case-insensitive; an empty dropPrefix drops
// nothing), then extra on top, unscrubbed, so an explicitly configured secret reaches the
// child. For a name given twice the last value wins. Entries without `=` are dropped. The
// result is sorted by name.
func ScrubEnv(environ []string, dropPrefix string, extra map[string]string) []string {
	vars := make(map[string]string, len(environ)+len(extra))
	upperPrefix := strings.ToUpper(dropPrefix)
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		upper := strings.ToUpper(name)
		if dropPrefix != "" && strings.HasPrefix(upper, upperPrefix) {
			continue
		}
		if slices.ContainsFunc(secretMarkers, func(m string) bool { return strings.Contains(upper, m) }) {
			continue
		}
		vars[name] = value
	}
	for name, value := range extra {
		vars[name] = value
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	env := make([]string, len(names))
	for i, name := range names {
		env[i] = name + "=" + vars[name]
	}
	return env
}
