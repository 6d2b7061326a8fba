package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/devserver"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// The stale-worker tests stall the worker process driving a child past the drive's heartbeat
// timeout, so the server retries the drive on a second worker process, and then let the first
// one run again: the classic stale lease. The retry elsewhere completes, the stale worker's
// appends are refused (its lease's fencing token is stale), and the transcript holds nothing
// lost and nothing twice.

// TestWorkerFrozenPastHeartbeatTimeout freezes the worker with SIGSTOP mid-turn and resumes
// it with SIGCONT once the second worker holds the session.
func TestWorkerFrozenPastHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	workerFrozen(t, "")
}

// TestWorkerFrozenPastHeartbeatTimeoutPostgres is TestWorkerFrozenPastHeartbeatTimeout on the
// Postgres session store (SUBFLOW_TEST_POSTGRES, see .ci/postgres.sh).
func TestWorkerFrozenPastHeartbeatTimeoutPostgres(t *testing.T) {
	url := os.Getenv("SUBFLOW_TEST_POSTGRES")
	if url == "" {
		t.Skip("SUBFLOW_TEST_POSTGRES is not set (eval \"$(.ci/postgres.sh)\")")
	}
	t.Parallel()
	workerFrozen(t, url)
}

func workerFrozen(t *testing.T, storeSpec string) {
	f := newFaultEnv(t, storeSpec)
	staleWorker(t, f, func() *workerProc { return f.startWorker() }, func(w *workerProc, childID string) func() {
		for try := 1; ; try++ {
			require.NoError(t, syscall.Kill(w.pid(), syscall.SIGSTOP))
			if storeSpec != "" || !flocked(t, filepath.Join(f.store, childID, "lease")) {
				break
			}
			// Frozen inside a fenced append, which holds the lease file's flock: on the file
			// store (one host's store) a takeover waits for that append to finish, so this is
			// not the stale-lease case under test. Let it leave the append and freeze it again.
			require.NoError(t, syscall.Kill(w.pid(), syscall.SIGCONT))
			require.Less(t, try, 1000, "the worker is always inside a fenced append")
			time.Sleep(time.Millisecond) // a retry pause, not a synchronisation
		}
		return func() { require.NoError(t, syscall.Kill(w.pid(), syscall.SIGCONT)) }
	})
}

// flocked says whether another process holds a flock on path.
func flocked(t *testing.T, path string) bool {
	fd, err := os.Open(path)
	require.NoError(t, err)
	defer fd.Close()
	err = syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		require.NoError(t, syscall.Flock(int(fd.Fd()), syscall.LOCK_UN))
		return false
	}
	require.ErrorIs(t, err, syscall.EWOULDBLOCK)
	return true
}

// TestWorkerPartitionedFromServer runs the first worker in a network namespace of its own,
// joined to the test's server by a veth pair, and cuts the link mid-turn: the worker still
// reaches the (file) session store, but not Temporal. The link comes back once the second
// worker holds the session. Needs root and iproute2's ip; the addresses are link-local ones
// on the test's own veth pair.
func TestWorkerPartitionedFromServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("TestWorkerPartitionedFromServer needs root (it creates a network namespace and a veth pair)")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("TestWorkerPartitionedFromServer needs iproute2's ip: " + err.Error())
	}
	t.Parallel()
	n := newNetns(t, ip)

	// A server of the test's own on the host side of the veth, reachable from both namespaces.
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{IP: n.hostAddr, UIPort: devserver.NoUI, LogLevel: "error"})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Stop() })
	c, err := client.Dial(srv.ClientOptions())
	require.NoError(t, err)
	t.Cleanup(c.Close)

	f := newFaultEnv(t, "")
	f.c, f.addr, f.namespace = c, srv.FrontendAddr(), srv.Namespace()
	staleWorker(t, f, func() *workerProc { return f.startWorkerVia([]string{ip, "netns", "exec", n.name}) },
		func(*workerProc, string) func() {
			n.link(t, "down")
			return func() { n.link(t, "up") }
		})
}

// staleWorker runs a slow spawn run on a first worker (start), stalls it mid-turn (stall, given
// the worker and the child's session id, returns the function that ends the stall), waits until a second worker's retry holds the
// session, ends the stall and checks the outcome.
func staleWorker(t *testing.T, f *faultEnv, start func() *workerProc, stall func(w *workerProc, childID string) (resume func())) {
	const steps = 8
	responses := writeSteps(steps, 400)
	controlDir := t.TempDir()
	_, controlRun := startOn(t, env.c, rootInput(subagent.ProviderSpawn, controlDir, script(t, t.TempDir(), responses...), "write the files"))

	store := f.openStore()
	cwd := t.TempDir()
	writes := countWrites(t, cwd)
	w1 := start()
	pub, run := f.start(rootInput(subagent.ProviderSpawn, cwd, script(t, t.TempDir(), responses...), "write the files"))
	writes.waitFiles(t, 2)
	resume := stall(w1, pub.ChildID)
	_, ended := storedResults(t, store, pub.ChildID)
	require.False(t, ended, "the worker stalled mid-turn")

	w2 := f.startWorker()
	// The retry took the lease: the first worker's lease expired, and its token is stale.
	waitLog(t, w2, "session lease taken")
	resume()

	out, cancelled := outcome(t, run)
	require.False(t, cancelled)
	want, cancelled := outcome(t, controlRun)
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, want.Result, out.Result, "the result equals the uninterrupted run's")

	// The stale drive ends by itself: its renewal finds the token stale, its heartbeat finds
	// the attempt gone, or its next append is fenced, whichever comes first.
	waitLog(t, w1, "drive lost its", session.ErrFenced.Error())
	tr := checkTranscript(t, store, pub.ChildID)
	assert.Equal(t, session.EndCompleted, tr.end.Kind)
	assert.Equal(t, stepless(checkTranscript(t, openFileStore(t, env.sessionRoot), want.ChildID).results),
		stepless(tr.results), "the same tool results as the uninterrupted run, none twice")
	assert.Len(t, tr.paths, steps)
	log, err := os.ReadFile(w1.log)
	require.NoError(t, err)
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "drive lost its") || strings.Contains(line, session.ErrFenced.Error()) {
			t.Logf("stale worker: %s", line)
		}
		if strings.Contains(line, "append") && strings.Contains(line, "error") {
			assert.Contains(t, line, session.ErrFenced.Error(), "a stale worker's append fails only by fencing")
		}
	}
	attempts, _ := activityAttempts(history(t, f.c, run))
	assert.GreaterOrEqual(t, attempts[workflows.ActivityDrive], int32(2), "the drive was retried")
}

// startOn starts a run on the package's task queue through c.
func startOn(t testing.TB, c client.Client, in workflows.StartInput) (workflows.Published, client.WorkflowRun) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	pub, run, err := subflow.Start(ctx, c, subflow.StartOptions{TaskQueue: env.taskQueue, Input: in})
	require.NoError(t, err)
	return pub, run
}

// waitLog waits until the worker's log holds a line containing one of texts.
func waitLog(t testing.TB, w *workerProc, texts ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(w.log)
		for _, s := range texts {
			if err == nil && strings.Contains(string(data), s) {
				return true
			}
		}
		return false
	}, 2*waitLimit, waitTick, "%s never logged any of %q", w.log, texts)
}

// netns is a network namespace joined to the test's namespace by a veth pair.
type netns struct {
	ip       string // the ip command
	name     string
	hostLink string
	nsLink   string
	hostAddr string // the host side's address; the namespace side has the next one
}

// newNetns creates the namespace and the pair, with link-local addresses of a random /30
// (never 169.254.169.0/24, the cloud metadata range), and removes them when the test ends.
func newNetns(t *testing.T, ip string) *netns {
	t.Helper()
	tag := fmt.Sprintf("%06x", rand.Uint32()&0xffffff)
	third := 1 + rand.IntN(250)
	if third == 169 {
		third = 170
	}
	fourth := 4 * rand.IntN(63)
	n := &netns{ip: ip, name: "subflow-" + tag, hostLink: "sfh" + tag,
		hostAddr: fmt.Sprintf("169.254.%d.%d", third, fourth+1)}
	n.nsLink = "sfn" + tag
	nsLink, nsAddr := n.nsLink, fmt.Sprintf("169.254.%d.%d", third, fourth+2)
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(ip, args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	run("netns", "add", n.name)
	t.Cleanup(func() { _ = exec.Command(ip, "netns", "delete", n.name).Run() })
	run("link", "add", n.hostLink, "type", "veth", "peer", "name", nsLink)
	t.Cleanup(func() { _ = exec.Command(ip, "link", "delete", n.hostLink).Run() })
	run("link", "set", nsLink, "netns", n.name)
	run("addr", "add", n.hostAddr+"/30", "dev", n.hostLink)
	run("link", "set", n.hostLink, "up")
	run("netns", "exec", n.name, ip, "addr", "add", nsAddr+"/30", "dev", nsLink)
	run("netns", "exec", n.name, ip, "link", "set", nsLink, "up")
	run("netns", "exec", n.name, ip, "link", "set", "lo", "up")
	return n
}

// link sets the namespace's side of the pair up or down. The host side stays up, so its
// address (the server's) stays reachable from the host.
func (n *netns) link(t testing.TB, state string) {
	t.Helper()
	out, err := exec.Command(n.ip, "netns", "exec", n.name, n.ip, "link", "set", n.nsLink, state).CombinedOutput()
	require.NoError(t, err, "ip link set %s %s in %s: %s", n.nsLink, state, n.name, out)
}
