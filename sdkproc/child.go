package sdkproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/internal/wire"
)

// child is one spawned runtime process: its pipes, its JSON-RPC connection and its reaper.
type child struct {
	pid    int
	conn   *wire.Conn
	stdin  *os.File // our write end; closed by conn.Close
	stdout *os.File // our read end
	stderr *os.File // our read end
	tail   stderrTail
	log    *zap.Logger

	stderrDone chan struct{} // closed when stderr reached EOF or was closed
	exited     chan struct{} // closed once the process is reaped
	state      *os.ProcessState
	waitErr    error

	releaseOnce sync.Once
}

// spawnOptions are the inputs of spawn.
type spawnOptions struct {
	command      string
	args         []string
	dir          string
	env          []string
	maxFrameSize int
	log          *zap.Logger
	onNotify     wire.NotifyFunc
	handlers     map[string]wire.Handler // the child's requests to us
}

// spawn starts the child in its own process group, with SIGKILL as its parent-death signal,
// and starts the connection's read loop. The process is reaped by the goroutine that
// started it, as soon as it exits.
func spawn(opts spawnOptions) (*child, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, &SpawnError{Command: opts.command, Err: err}
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, &SpawnError{Command: opts.command, Err: err}
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, &SpawnError{Command: opts.command, Err: err}
	}

	cmd := exec.Command(opts.command, opts.args...)
	cmd.Dir = opts.dir
	cmd.Env = opts.env
	// *os.File streams are handed to the child as they are: exec starts no copying
	// goroutines and Wait closes none of our ends, so frames written just before the exit
	// are still read after the reap.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = childProcAttr()

	c := &child{
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		log:        opts.log,
		stderrDone: make(chan struct{}),
		exited:     make(chan struct{}),
	}
	started := make(chan error, 1)
	go func() {
		// The thread that forks must outlive the child, or Pdeathsig kills it early (the
		// runtime may retire idle threads it does not own). Lock this goroutine to its
		// thread, start and reap the child on it, and never unlock: the thread exits only
		// when this goroutine returns, after the reap. One thread per live child.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.waitErr = cmd.Wait()
		c.state = cmd.ProcessState
		// Sweep what is left of the group (helpers the child started), so nothing holding
		// our pipes outlives the child. The group id cannot have been reused: it was the
		// child's pid and the kernel keeps it reserved while the group has members.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		close(c.exited)
	}()
	if err := <-started; err != nil {
		closeAll()
		return nil, &SpawnError{Command: opts.command, Err: err}
	}
	c.pid = cmd.Process.Pid
	c.log.Debug("child started", zap.Int("pid", c.pid), zap.String("command", opts.command), zap.String("cwd", opts.dir))
	// The child's ends belong to it now.
	inR.Close()
	outW.Close()
	errW.Close()

	go func() {
		defer close(c.stderrDone)
		c.tail.consume(errR, func(line string) {
			c.log.Debug("child stderr", zap.Int("pid", c.pid), zap.String("line", line))
		})
	}()
	c.conn = wire.NewConn(outR, inW, wire.Options{
		MaxFrameSize: opts.maxFrameSize,
		Closer:       inW,
		OnDiscard: func(err error) {
			c.log.Debug("child frame ignored", zap.Int("pid", c.pid), zap.Error(err))
		},
	})
	c.conn.OnNotify(opts.onNotify)
	for method, h := range opts.handlers {
		c.conn.Handle(method, h)
	}
	c.conn.Start()
	return c, nil
}

// hasExited reports whether the child has been reaped.
func (c *child) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// waitExit waits up to d for the reap; a done ctx cuts the wait short.
func (c *child) waitExit(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return c.hasExited()
}

// ladderOptions says which steps of the ladder to run and their bounds.
type ladderOptions struct {
	shutdown        bool // send the shutdown request first (only once the handshake succeeded)
	shutdownTimeout time.Duration
	eofGrace        time.Duration
	grace           time.Duration
}

// stop runs the termination ladder of contract R-55 and releases the child's pipes. It returns
// an error only when the child survived SIGKILL past the grace period. When ctx ends, the
// graceful waits are cut short and the ladder goes straight to SIGKILL: the caller is out
// of time, but the child is still reaped.
func (c *child) stop(ctx context.Context, opts ladderOptions) error {
	defer c.release()
	// "a `shutdown` request bounded by shutdownTimeoutMs": the polite way; the runtime
	// answers, flushes its sessions and exits 0. Its error does not matter: the
	// steps below make the exit happen anyway.
	if opts.shutdown && !c.hasExited() {
		c.log.Debug("dispose: shutdown request", zap.Int("pid", c.pid))
		c.call(ctx, opts.shutdownTimeout, wire.MethodShutdown, struct{}{}, nil)
	}
	// "if the process already exited stop".
	if c.hasExited() {
		return nil
	}
	// "close stdin and wait disposeEofGraceMs": EOF is the runtime's second exit path.
	// Closing the Conn also fails whatever call is still pending.
	c.log.Debug("dispose: closing stdin", zap.Int("pid", c.pid))
	c.conn.Close()
	if c.waitExit(ctx, opts.eofGrace) {
		return nil
	}
	// "SIGTERM (whole process group) and wait disposeGraceMs".
	if ctx.Err() == nil {
		c.log.Debug("dispose: SIGTERM to process group", zap.Int("pgid", c.pid))
		c.signalGroup(syscall.SIGTERM)
		if c.waitExit(ctx, opts.grace) {
			return nil
		}
	}
	// "SIGKILL and wait disposeGraceMs". The wait ignores ctx: a SIGKILLed process exits
	// promptly, and returning before the reap would leave a zombie behind.
	c.log.Debug("dispose: SIGKILL to process group", zap.Int("pgid", c.pid))
	c.signalGroup(syscall.SIGKILL)
	if c.waitExit(context.Background(), opts.grace) {
		return nil
	}
	return fmt.Errorf("%s: child process %d did not exit after SIGKILL", messagePrefix, c.pid)
}

func (c *child) signalGroup(sig syscall.Signal) {
	if c.hasExited() {
		return
	}
	if err := syscall.Kill(-c.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		c.log.Debug("dispose: signal failed", zap.Int("pgid", c.pid), zap.Stringer("signal", sig), zap.Error(err))
	}
}

// call runs a JSON-RPC call bounded by timeout. The call runs in its own goroutine because
// wire.Conn honours ctx only once the request is written, and a child that stopped reading
// its stdin can block that write until the Conn is closed.
func (c *child) call(ctx context.Context, timeout time.Duration, method string, params, result any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.conn.Call(ctx, method, params, result) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: %s: %w", messagePrefix, method, ctx.Err())
	}
}

// release closes the connection and, once the child is reaped, our ends of its pipes, which
// ends the read loops even if a process outside the group still holds the other ends. The
// stderr reader gets a short while to drain what the child wrote before exiting.
func (c *child) release() {
	c.releaseOnce.Do(func() {
		c.conn.Close()
		<-c.exited
		t := time.NewTimer(stderrDrainTimeout)
		defer t.Stop()
		select {
		case <-c.stderrDone:
		case <-t.C:
		}
		c.stdout.Close()
		c.stderr.Close()
	})
}

// stderrDrainTimeout bounds the wait for the rest of a reaped child's stderr.
const stderrDrainTimeout = time.Second

// exitError describes a child that exited before completing the handshake (contract R-52).
// Call it only after the reap.
func (c *child) exitError() error {
	var b strings.Builder
	b.WriteString("DeepSeek Harness runtime exited\n")
	code := -1
	if c.state != nil {
		code = c.state.ExitCode()
	}
	fmt.Fprintf(&b, "exit code: %d\n", code)
	if c.state != nil {
		if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			fmt.Fprintf(&b, "signal: %s\n", ws.Signal())
		}
	}
	b.WriteString("stderr tail:")
	for _, line := range c.tail.Lines() {
		b.WriteString("\n")
		b.WriteString(line)
	}
	return &ExitError{PID: c.pid, State: c.state, Stderr: c.tail.Lines(), msg: b.String()}
}

// ExitError is returned by Start when the child exited before the initialize handshake
// completed. Its message holds the lines `DeepSeek Harness runtime exited`,
// `exit code: N` (-1 when killed by a signal, followed by a `signal:` line), `stderr tail:`
// and the last (at most 400) stderr lines.
type ExitError struct {
	PID    int
	State  *os.ProcessState
	Stderr []string
	msg    string
}

func (e *ExitError) Error() string { return e.msg }

// SpawnError is StartRun's error when the child process could not be started at all: no
// pipe, no fork, or no executable at the command's path.
type SpawnError struct {
	Command string
	Err     error
}

func (e *SpawnError) Error() string {
	return fmt.Sprintf("%s: spawn %s: %v", messagePrefix, e.Command, e.Err)
}

func (e *SpawnError) Unwrap() error { return e.Err }

// Transient reports whether the spawn failed for want of a resource the host may have again
// soon — processes (EAGAIN), memory, file descriptors — so that starting the child again
// later can succeed. A missing or non-executable command is not transient: every attempt
// meets it.
func (e *SpawnError) Transient() bool {
	for _, errno := range []syscall.Errno{syscall.EAGAIN, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE} {
		if errors.Is(e.Err, errno) {
			return true
		}
	}
	return false
}
