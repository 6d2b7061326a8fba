package app

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// BuildInfo is what a subflow binary knows about its own build (`worker version`,
// `starter version`).
type BuildInfo struct {
	// Module is the main module's path.
	Module string
	// Version is the main module's version: a release tag (v1.0.0) or a pseudo-version when
	// built with `go install module@version`, "(devel)" when built from a checkout.
	Version string
	// Revision is the VCS commit the binary was built from, "" when the build recorded none
	// (-buildvcs=false, or a build outside a checkout).
	Revision string
	// Modified reports uncommitted changes in the checkout at build time.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// ReadBuildInfo returns the running binary's BuildInfo, read from runtime/debug.
func ReadBuildInfo() BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return BuildInfo{}
	}
	info := BuildInfo{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// BuildID is the default Worker Deployment build id of the binary (docs/deployment.md): its
// module version when it has a real one, else its VCS revision (12 digits, "-modified" when
// the checkout had changes), else "" — the binary cannot tell one build from another, and
// a versioned worker then needs an explicit build id.
func (b BuildInfo) BuildID() string {
	if b.Version != "" && b.Version != "(devel)" {
		return b.Version
	}
	if b.Revision == "" {
		return ""
	}
	id := b.Revision
	if len(id) > 12 {
		id = id[:12]
	}
	if b.Modified {
		id += "-modified"
	}
	return id
}

// Print writes the build info as `version` prints it, with buildID the build id the
// binary's workers use ("" when none can be derived).
func (b BuildInfo) Print(w io.Writer, program, buildID string) {
	or := func(v, none string) string {
		if v == "" {
			return none
		}
		return v
	}
	rev := or(b.Revision, "none recorded")
	if b.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(w, "%s %s\n", program, or(b.Version, "(unknown)"))
	fmt.Fprintf(w, "  module    %s\n", or(b.Module, "(unknown)"))
	fmt.Fprintf(w, "  build id  %s\n", or(buildID, "none: give --build-id or $"+EnvBuildID))
	fmt.Fprintf(w, "  revision  %s\n", rev)
	fmt.Fprintf(w, "  go        %s\n", or(b.GoVersion, "(unknown)"))
}

// validDeploymentName reports why name cannot name a Worker Deployment: Temporal reserves
// "." (it separates deployment and build id in a version string).
func validDeploymentName(name string) error {
	if strings.Contains(name, ".") {
		return fmt.Errorf("app: deployment name %q must not contain \".\" (Temporal reserves it)", name)
	}
	if strings.TrimSpace(name) != name {
		return fmt.Errorf("app: deployment name %q must not start or end with white space", name)
	}
	return nil
}
