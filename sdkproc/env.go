package sdkproc

import (
	"fmt"
	"slices"
	"strings"
)

// baseChildEnv are the variables of the worker's environment every sdk child gets (contract
// R-53), besides the LC_* family and the proxy variables.
var baseChildEnv = []string{
	"PATH", "HOME", "USER", "LANG", "TZ", "TMPDIR", "TERM", "SSL_CERT_FILE", "SSL_CERT_DIR",
}

// proxyEnv are the proxy variables, passed in either case with any credentials removed.
var proxyEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}

// secretMarkers and secretPrefix are upstream's denylist (contract R-53): a name containing one of
// the markers, or starting with the prefix (both case-insensitive), never comes from the
// worker's environment, whichever allowlist names it.
var secretMarkers = []string{"KEY", "PASSWORD", "SECRET", "TOKEN"}

const secretPrefix = "DSH_"

// childEnv returns an sdk child's environment (contract R-53): from environ (NAME=value entries,
// as from os.Environ) only the allowlisted variables — baseChildEnv, LC_*, the proxy variables
// with `user:password@` removed, and the operator's extra names, passed as they are — minus
// every name upstream's denylist drops; then explicit on top, unfiltered, so a configured
// provider key reaches the child. The result is sorted by name.
func childEnv(environ, extra []string, explicit map[string]string) []string {
	vars := make(map[string]string)
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" || denied(name) {
			continue
		}
		switch {
		case slices.Contains(baseChildEnv, name), strings.HasPrefix(name, "LC_"), slices.Contains(extra, name):
			vars[name] = value
		case slices.Contains(proxyEnv, strings.ToUpper(name)):
			vars[name] = stripUserinfo(value)
		}
	}
	for name, value := range explicit {
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

// denied reports whether upstream's denylist drops name.
func denied(name string) bool {
	upper := strings.ToUpper(name)
	return strings.HasPrefix(upper, secretPrefix) ||
		slices.ContainsFunc(secretMarkers, func(m string) bool { return strings.Contains(upper, m) })
}

// stripUserinfo removes the `user:password@` part of each URL in a proxy variable's value
// (NO_PROXY is a comma-separated list; the proxy URLs may lack a scheme), leaving the rest as
// written.
func stripUserinfo(value string) string {
	parts := strings.Split(value, ",")
	for i, p := range parts {
		scheme, rest := "", p
		if j := strings.Index(p, "://"); j >= 0 {
			scheme, rest = p[:j+3], p[j+3:]
		}
		host, path := rest, ""
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			host, path = rest[:j], rest[j:]
		}
		if j := strings.LastIndex(host, "@"); j >= 0 {
			parts[i] = scheme + host[j+1:] + path
		}
	}
	return strings.Join(parts, ",")
}

// checkEnvNames rejects operator-added names that cannot name a variable.
func checkEnvNames(names []string) error {
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			return fmt.Errorf("%s: childEnv name %q is not a variable name", messagePrefix, n)
		}
	}
	return nil
}
