package sdkproc

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChildDiesWithWorker(t *testing.T) {
	// Adopt orphans for the duration of the test, so the child can be reaped (and its end
	// observed) here rather than left a zombie under an init that may not reap.
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Skipf("cannot become a child subreaper: %v", errno)
	}
	defer syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0)

	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), workerEnv+"="+badchildBin)
	out, err := worker.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, worker.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)

	require.NoError(t, worker.Process.Kill())
	_ = worker.Wait()
	reaped := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == nil {
			reaped <- ws
		}
	}()
	select {
	case ws := <-reaped:
		require.True(t, ws.Signaled())
		assert.Equal(t, syscall.SIGKILL, ws.Signal(), "the parent-death signal")
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("child %d outlived its worker", pid)
	}
}
