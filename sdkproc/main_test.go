package sdkproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// Paths of the child binaries built once by TestMain.
var (
	badchildBin string
	agentBin    string
)

func TestMain(m *testing.M) {
	if bin := os.Getenv(workerEnv); bin != "" {
		os.Exit(runWorker(bin))
	}
	os.Exit(runTests(m))
}

// workerEnv makes the test binary act as a worker holding one run (see TestChildDiesWithWorker).
const workerEnv = "SDKPROC_TEST_WORKER_CHILD"

// runWorker starts a run of badchild (path bin) in ignore-term mode, prints the child's pid
// and waits to be killed.
func runWorker(bin string) int {
	cfg := badConfig("ignore-term")
	cfg.Command = bin
	p, err := New(cfg, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, _ := os.Getwd()
	r, err := p.StartRun(context.Background(), subagent.Request{Parent: subagent.ParentRef{Cwd: dir}}, RunOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(r.PID())
	select {}
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sdkproc-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	badchildBin = filepath.Join(dir, "badchild")
	agentBin = filepath.Join(dir, "worker") // run as: agentBin child-runtime …
	for _, b := range []struct{ out, pkg string }{
		{badchildBin, "./sdkproc/testdata/badchild"},
		{agentBin, "./worker"},
	} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// harness is a provider under test with its observed logs.
type harness struct {
	p    *Provider
	logs *observer.ObservedLogs
}

func newHarness(t testing.TB, cfg Config, opts Options) *harness {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	opts.Logger = zap.New(core)
	p, err := New(cfg, opts)
	require.NoError(t, err)
	return &harness{p: p, logs: logs}
}

// badConfig runs badchild in mode with small ladder bounds.
func badConfig(mode string) Config {
	return Config{
		Command:           badchildBin,
		Args:              []string{mode},
		ShutdownTimeoutMs: 300,
		DisposeEOFGraceMs: 300,
		DisposeGraceMs:    300,
	}
}

func request(t testing.TB, text string) subagent.Request {
	return subagent.Request{
		Prompt: []session.Block{session.Text(text)},
		Parent: subagent.ParentRef{SessionID: "parent", Cwd: t.TempDir()},
	}
}

// start starts a run and registers its disposal.
func (h *harness) start(t *testing.T, req subagent.Request) *Run {
	t.Helper()
	r, err := h.p.StartRun(context.Background(), req, RunOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Dispose(context.Background()) })
	return r
}

func (h *harness) warnings() []string {
	var out []string
	for _, e := range h.logs.FilterLevelExact(zapcore.WarnLevel).All() {
		out = append(out, e.Message)
	}
	return out
}

func (h *harness) messages() []string {
	var out []string
	for _, e := range h.logs.All() {
		out = append(out, e.Message)
	}
	return out
}

// startedPID waits for the "child started" log and returns its pid.
func (h *harness) startedPID(t *testing.T) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		entries := h.logs.FilterMessage("child started").All()
		if len(entries) == 0 {
			return false
		}
		pid = int(entries[0].ContextMap()["pid"].(int64))
		return true
	}, 10*time.Second, 5*time.Millisecond)
	return pid
}

// requireGone asserts that pid is no process at all: neither running nor a zombie.
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "process %d still exists", pid)
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	require.True(t, errors.Is(err, os.ErrNotExist), "/proc/%d still exists", pid)
}

func text(res subagent.Result) string { return session.JoinText(res.Output) }

func realpath(t testing.TB, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return r
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// waitPhase waits until the run reaches phase.
func waitPhase(t *testing.T, r *Run, phase string) {
	t.Helper()
	require.Eventually(t, func() bool { return r.Progress().Phase == phase }, 10*time.Second, 5*time.Millisecond)
}
