package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	addr string // the frontend's host:port, as the server reported it
	done chan struct{}
}

// startDevServer starts the embedded server with database db on ports it picks itself and
// returns once it serves.
func startDevServer(t testing.TB, db string) *devServer {
	t.Helper()
	cmd := exec.Command(env.starter, "dev", "--no-worker", "--port", "0", "--ui-port", "0", "--db", db)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	logFile, err := os.Create(db + fmt.Sprintf(".%d.log", time.Now().UnixNano()))
	require.NoError(t, err)
	defer logFile.Close()
	cmd.Stderr = logFile
	require.NoError(t, cmd.Start())
	s := &devServer{cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		addr := ""
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "Temporal server"); ok && addr == "" {
				addr = strings.Fields(rest)[0]
			}
			if strings.HasPrefix(line, "Serving until interrupted") {
				ready <- addr
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.stop() })
	select {
	case s.addr = <-ready:
		require.NotEmpty(t, s.addr, "starter dev reported its frontend address")
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

// frontendProxy is the address clients and workers dial, on a listener the test keeps for the
// whole test: it forwards each connection to the current server. A restarted server picks
// a new port itself; restarting it on the old port could fail, since a reconnecting client
// may hold that port (a connection attempt to a closed port in the ephemeral range can be
// given that very port as its own and connect to itself).
type frontendProxy struct {
	l net.Listener

	mu      sync.Mutex
	backend string // "" while the server is down: connections are closed at once
	conns   map[net.Conn]struct{}
}

func newFrontendProxy(t testing.TB) *frontendProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &frontendProxy{l: l, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = l.Close()
		p.setBackend("")
	})
	return p
}

func (p *frontendProxy) addr() string { return p.l.Addr().String() }

// setBackend points new connections at addr and closes the open ones.
func (p *frontendProxy) setBackend(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend = addr
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *frontendProxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.forward(in)
	}
}

func (p *frontendProxy) forward(in net.Conn) {
	p.mu.Lock()
	backend := p.backend
	p.mu.Unlock()
	if backend == "" {
		_ = in.Close()
		return
	}
	out, err := net.Dial("tcp", backend)
	if err != nil {
		_ = in.Close()
		return
	}
	p.mu.Lock()
	if p.backend != backend { // switched while dialling
		p.mu.Unlock()
		_ = in.Close()
		_ = out.Close()
		return
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() {
		_, _ = io.Copy(out, in)
		_ = out.Close()
	}()
	_, _ = io.Copy(in, out)
	_ = in.Close()
}

// TestServerRestart stops the Temporal server (the embedded server on a file database, in a
// process of its own) while a worker process drives a run, and starts it again on the same
// database, behind the same address: the worker and the client reconnect and the run
// completes, with a clean transcript.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "temporal.db")
	srv := startDevServer(t, db)
	proxy := newFrontendProxy(t)
	proxy.setBackend(srv.addr)
	addr := proxy.addr()
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

	proxy.setBackend("")
	srv.stop()
	_, ended := storedResults(t, store, pub.ChildID)
	require.False(t, ended, "the server stopped mid-turn")
	proxy.setBackend(startDevServer(t, db).addr)

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
