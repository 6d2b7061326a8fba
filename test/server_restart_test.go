package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
	"github.com/subflow-dev/subflow/workflows/replaytest"
)

// devServer is a `starter dev --no-worker` process: the embedded server on a file database.
type devServer struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startDevServer starts the embedded server on port with database db and returns once it
// serves.
func startDevServer(t testing.TB, port int, db string) *devServer {
	t.Helper()
	cmd := exec.Command(env.starter, "dev", "--no-worker", "--port", strconv.Itoa(port), "--ui-port", "0", "--db", db)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	logFile, err := os.Create(db + fmt.Sprintf(".%d.log", time.Now().UnixNano()))
	require.NoError(t, err)
	defer logFile.Close()
	cmd.Stderr = logFile
	require.NoError(t, cmd.Start())
	s := &devServer{cmd: cmd, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.HasPrefix(sc.Text(), "Serving until interrupted") {
				close(ready)
				signalled = true
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.stop() })
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("starter dev exited before serving (log in %s)", logFile.Name())
	case <-time.After(2 * waitLimit):
		t.Fatal("starter dev did not serve")
	}
	return s
}

// stop stops the server as Ctrl-C does and waits for it to exit.
func (s *devServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(waitLimit):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func freeTCPPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServerRestart stops the Temporal server (the embedded server on a file database, in a
// process of its own) while a worker process drives a run, and starts it again on the same
// port and database: the worker and the client reconnect and the run completes, with a clean
// transcript.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "temporal.db")
	port := freeTCPPort(t)
	srv := startDevServer(t, port, db)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c, err := client.Dial(client.Options{HostPort: addr})
	require.NoError(t, err)
	defer c.Close()

	f := newFaultEnv(t, "")
	f.c, f.addr, f.namespace = c, addr, "default"
	store := f.openStore()
	cwd := t.TempDir()
	writes := countWrites(t, cwd)
	const steps = 6
	f.startWorker()
	pub, run := f.start(rootInput(subagent.ProviderSpawn, cwd, script(t, t.TempDir(), writeSteps(steps, 700)...), "write the files"))
	writes.waitFiles(t, 2)

	srv.stop()
	_, ended := storedResults(t, store, pub.ChildID)
	require.False(t, ended, "the server stopped mid-turn")
	startDevServer(t, port, db)

	var out workflows.Outcome
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, &out) == nil
	}, 2*waitLimit, 100*time.Millisecond, "the run did not complete after the restart")
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, fmt.Sprintf("wrote %d files, one per step", steps), session.JoinText(out.Result.Output))
	tr := checkTranscript(t, store, pub.ChildID)
	// The same worker process resumes the turn, and the scripted model gives a cancelled
	// request's response to no one (harness/model: cancelled requests consume their
	// positions), so the step the outage interrupted may be missing from the transcript.
	assert.GreaterOrEqual(t, len(tr.paths), steps-1)
	for _, path := range tr.paths {
		assert.GreaterOrEqual(t, writes.settle(t)[path], 1, "%s was written", path)
	}
	if os.Getenv(recordEnv) == "1" {
		path := filepath.Join("..", "workflows", "testdata", "spawn-server-restart.json")
		require.NoError(t, replaytest.WriteFile(context.Background(), c, run.GetID(), run.GetRunID(), path))
	}
}
