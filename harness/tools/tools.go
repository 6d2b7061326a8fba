// Package tools holds the tool registry, per-agent scopes (restrictions, scoped registrations,
// guards, result observers) and the built-in file tools.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/subflow-dev/subflow/harness/session"
)

// Sandbox modes and approval policies an agent may run under.
const (
	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
	ApprovalNever         = "never"
)

// SandboxModes are the known sandbox modes, in the order messages list them.
var SandboxModes = []string{SandboxReadOnly, SandboxWorkspaceWrite}

// CheckSandboxMode rejects a sandbox mode that is not one of SandboxModes, spelled exactly
// (names are case-sensitive: `Read-Only` is unknown, not read-only), with an
// *UnknownSandboxModeError. "" (no mode) passes.
func CheckSandboxMode(mode string) error {
	if mode == "" {
		return nil
	}
	for _, m := range SandboxModes {
		if mode == m {
			return nil
		}
	}
	return &UnknownSandboxModeError{Mode: mode}
}

// UnknownSandboxModeError names a sandbox mode that is not known, and the known ones.
type UnknownSandboxModeError struct{ Mode string }

func (e *UnknownSandboxModeError) Error() string {
	return fmt.Sprintf("unknown sandbox mode %q; known modes: %s", e.Mode, strings.Join(SandboxModes, ", "))
}

// WritesAllowed reports whether a sandbox mode lets tools write without approval: no mode, or
// workspace-write. Any other mode — read-only, or one that is not known — forbids writes, so a
// misspelt mode never widens what a tool may do.
func WritesAllowed(mode string) bool {
	return mode == "" || mode == SandboxWorkspaceWrite
}

// Env is what a tool call may know of the agent executing it.
type Env struct {
	SessionID      string
	Cwd            string // absolute; file tools are confined to it
	SandboxMode    string // "" when none was set
	ApprovalPolicy string // "" when none was set
	// Protected are absolute directories the file tools refuse to touch, whatever the cwd:
	// the session stores, whose transcripts belong to other runs.
	Protected []string
	// Roots, when set, are the absolute, symlink-free workspace roots the worker serves: the
	// cwd, resolved, must lie under one of them, or every file tool refuses to run (a cwd
	// that is a symlink out of a root, or one set by a run started around the starter;
	// docs/deployment.md). Empty means any cwd.
	Roots []string
	// HardLinkRoots are the absolute, symlink-free workspace roots whose hard links the
	// operator trusts (worker --workspace-root trust-hardlinks:DIR). A regular file with
	// more than one hard link may share its inode with a file outside the cwd, so the file
	// tools read one only when the cwd, resolved, lies under one of these; elsewhere
	// read_file refuses it with a *HardLinkError and grep skips it. Writes never need
	// this: write_file replaces the name, never the inode behind it.
	HardLinkRoots []string
}

// Call is one tool call the model asked for. Input is a JSON object.
type Call struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// Result is what a tool call gives back to the model.
type Result struct {
	Content []session.Block
	IsError bool
	// Deferred says the call is answered later, from outside the agent (a delegation the
	// caller runs as a durable workflow): the agent stores no result for it, runs the step's
	// other calls, and leaves the turn pending for a later Resume, which finds the result
	// stored by then. Content and IsError are ignored.
	Deferred bool
}

// ErrorResult is the tool-facing rendering of a failure: one text block `Error: <msg>`.
func ErrorResult(msg string) Result {
	return Result{Content: []session.Block{session.Text("Error: " + msg)}, IsError: true}
}

// TextResult is a successful result of one text block.
func TextResult(s string) Result {
	return Result{Content: []session.Block{session.Text(s)}}
}

// Handler executes a call. A returned error is shown to the model as ErrorResult(err.Error()).
type Handler func(ctx context.Context, env Env, call Call) (Result, error)

// Tool is a named, described, schema-typed handler.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON schema, object-rooted
	// NeedsApproval, when set, reports whether this call needs a human's approval under env.
	// No approver exists in subflow, so such calls are rejected without asking anyone.
	NeedsApproval func(env Env, call Call) bool
	Handler       Handler
}

// Guard runs before a call executes and can only deny: a non-empty return is the denial
// message, shown to the model as ErrorResult(msg), and the handler does not run.
type Guard func(ctx context.Context, env Env, call Call) (deny string)

// Observer sees every execution's final result (after guards, approval and the handler).
type Observer func(env Env, call Call, result Result)
