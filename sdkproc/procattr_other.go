//go:build !linux

package sdkproc

import "syscall"

// childProcAttr puts the child in its own process group, so the ladder's signals reach the
// child's helpers too. Outside Linux there is no parent-death signal: a child whose worker
// died is stopped by its stdin reaching EOF (the worker's end of the pipe closes with the
// worker), on which the child runtime exits (contract R-63). A child runtime that ignores EOF can
// outlive a killed worker there; see docs/deployment.md.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
