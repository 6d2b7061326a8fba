package filestore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/session/storetest"
)

func TestFileStoreContract(t *testing.T) {
	root := t.TempDir()
	storetest.Run(t, func(t *testing.T) session.Store { return newStore(t, root) })
}

// leaseHolderEnv makes the test binary a lease holder: see TestLeaseDiesWithProcess.
const leaseHolderEnv = "SUBFLOW_TEST_LEASE_HOLDER_ROOT"

// holderTTL is the lease ttl of the killed holder: its lease ends that long after its death.
const holderTTL = 300 * time.Millisecond

// TestLeaseDiesWithProcess kills a process holding a lease and takes the lease after it: the
// dead holder no longer renews, so the lease expires.
func TestLeaseDiesWithProcess(t *testing.T) {
	if root := os.Getenv(leaseHolderEnv); root != "" {
		holdLease(t, root)
		return
	}
	root := t.TempDir()
	s := newStore(t, root)
	require.NoError(t, s.Create(ctx, header("s")))

	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseDiesWithProcess$")
	cmd.Env = append(os.Environ(), leaseHolderEnv+"="+root)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe() // the holder waits on it, so it never exits by itself
	require.NoError(t, err)
	defer stdin.Close()
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	requireLine(t, out, "leased")

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = session.TakeLease(done, s, "s", time.Minute)
	require.ErrorIs(t, err, session.ErrLeased, "the other process holds the lease")

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	lease, err := session.TakeLease(wait, s, "s", time.Minute)
	require.NoError(t, err, "the lease died with its holder")
	assert.Equal(t, int64(2), lease.Token(), "the dead holder had token 1")
	assert.NoError(t, lease.Release())
}

// holdLease is the child's side: take the lease, say so, and wait to be killed.
func holdLease(t *testing.T, root string) {
	s, err := filestore.New(root)
	require.NoError(t, err)
	_, err = session.TakeLease(ctx, s, "s", holderTTL)
	require.NoError(t, err)
	fmt.Println("leased")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

func requireLine(t *testing.T, r interface{ Read([]byte) (int, error) }, want string) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if sc.Text() == want {
			return
		}
	}
	t.Fatalf("the lease holder ended before printing %q: %v", want, sc.Err())
}
