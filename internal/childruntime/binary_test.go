package childruntime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/internal/wire"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// agentBinary builds the worker (whose child-runtime subcommand is the runtime) once per test
// binary and returns its path; callers run it with the child-runtime argument first.
func agentBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "subflow-agent-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "worker")
		out, err := exec.Command("go", "build", "-o", buildPath, "github.com/subflow-dev/subflow/worker").CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	require.NoError(tb, buildErr)
	return buildPath
}

// process is the runtime binary with a wire.Conn client on its stdio. Its raw stdout is kept
// to check that nothing but frames is written there.
type process struct {
	cmd    *exec.Cmd
	conn   *wire.Conn
	notes  *noteLog
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{}
	// sessions is the runtime's session root.
	sessions string
}

func startProcess(tb testing.TB, cwd string) *process {
	tb.Helper()
	sessions := tb.TempDir()
	cmd := exec.Command(agentBinary(tb), "child-runtime", "--session-root", sessions)
	cmd.Dir = cwd
	p := &process{cmd: cmd, sessions: sessions, notes: &noteLog{}, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	p.conn = wire.NewConn(io.TeeReader(stdout, p.stdout), stdin, wire.Options{Closer: stdin})
	p.conn.OnNotify(p.notes.add)
	p.conn.Start()
	go func() {
		<-p.conn.Done() // stdout fully read before Wait closes it
		_ = cmd.Wait()
		close(p.exited)
	}()
	tb.Cleanup(func() {
		_ = p.conn.Close()
		select {
		case <-p.exited:
		case <-time.After(waitTimeout):
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// exitCode signals the process and returns its exit code.
func (p *process) exitCode(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.exited:
	case <-time.After(waitTimeout):
		t.Fatalf("runtime did not exit after %v", sig)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *process) initialize(t *testing.T, cwd, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var res wire.InitializeResult
	require.NoError(t, p.conn.Call(ctx, wire.MethodInitialize, wire.InitializeParams{Cwd: cwd, Provider: "scripted", Model: script}, &res))
	assert.Equal(t, wire.ServerName, res.ServerInfo.Name)
	assert.NotEmpty(t, res.ServerInfo.Version)
}

func TestBinaryServesFramesAndHandlesSignals(t *testing.T) {
	cwd := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "hello.txt"), []byte("hi from a file\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "script.json"), []byte(`{"responses": [
		{"toolCalls": [{"name": "read_file", "input": {"path": "hello.txt"}}]},
		{"text": "it says hi", "chunks": 2},
		{"error": "boom"}
	]}`), 0o644))

	t.Run("SIGTERM exits 0 and stdout holds frames only", func(t *testing.T) {
		p := startProcess(t, cwd)
		p.initialize(t, cwd, "script.json")
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		var res wire.PromptResult
		require.NoError(t, p.conn.Call(ctx, wire.MethodSessionPrompt, wire.PromptParams{
			SessionID: "bin-1", ContentBlocks: []session.Block{session.Text("read hello.txt")},
		}, &res))
		evs := events(p.notes.waitIdle(t, "bin-1"))
		assert.Equal(t, session.EndReason{Kind: session.EndCompleted}, lastTurnEnd(t, evs).Reason)

		assert.Equal(t, 0, p.exitCode(t, syscall.SIGTERM))
		lines := bytes.Split(bytes.TrimSuffix([]byte(p.stdout.String()), []byte("\n")), []byte("\n"))
		require.NotEmpty(t, lines)
		for _, line := range lines {
			var m map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(line, &m), "stdout line %q", line)
			assert.JSONEq(t, `"2.0"`, string(m["jsonrpc"]), "stdout line %q", line)
		}
		// The transcript is in the runtime's own session root.
		_, logged, err := loadSession(t, p.sessions, "bin-1")
		require.NoError(t, err)
		assert.Len(t, logged, len(evs))
	})

	t.Run("SIGINT exits 130", func(t *testing.T) {
		p := startProcess(t, cwd)
		p.initialize(t, cwd, "script.json")
		assert.Equal(t, ExitInterrupted, p.exitCode(t, syscall.SIGINT))
	})

	t.Run("stdin EOF exits 0", func(t *testing.T) {
		p := startProcess(t, cwd)
		p.initialize(t, cwd, "script.json")
		require.NoError(t, p.conn.Close())
		<-p.exited
		assert.Equal(t, 0, p.cmd.ProcessState.ExitCode())
	})

	t.Run("bad arguments exit 2", func(t *testing.T) {
		out, err := exec.Command(agentBinary(t), "child-runtime", "--no-such-flag").CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "output: %s", out)
		assert.Equal(t, ExitUsage, ee.ExitCode())
	})
}

// BenchmarkSpawnHandshake measures exec of the runtime binary plus the initialize round trip,
// the latency a delegation pays before its prompt can be sent. It reports percentiles.
func BenchmarkSpawnHandshake(b *testing.B) {
	bin := agentBinary(b)
	cwd := b.TempDir()
	params := wire.InitializeParams{Cwd: cwd, Provider: "scripted", Model: "script.json"}
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		cmd := exec.Command(bin, "child-runtime")
		stdin, err := cmd.StdinPipe()
		require.NoError(b, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(b, err)
		require.NoError(b, cmd.Start())
		conn := wire.NewConn(bufio.NewReader(stdout), stdin, wire.Options{Closer: stdin})
		conn.Start()
		var res wire.InitializeResult
		require.NoError(b, conn.Call(context.Background(), wire.MethodInitialize, params, &res))
		samples = append(samples, time.Since(start))
		b.StopTimer()
		_ = conn.Close()
		<-conn.Done()
		require.NoError(b, cmd.Wait())
		b.StartTimer()
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	pct := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.9), "p90-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
