package sdkproc

import "syscall"

// childProcAttr puts the child in its own process group, so the ladder's signals reach the
// child's helpers too, and has the kernel kill it when the worker dies (contract R-55): Linux
// sends the parent-death signal when the forking *thread* exits, hence the locked thread of
// spawn.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
