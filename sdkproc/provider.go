package sdkproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/internal/telemetry"
	"github.com/subflow-dev/subflow/internal/wire"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/subagent/workdir"
)

// ErrAbortedBeforeStart is matched by the error Start returns when its context is done before
// the handshake completed: nothing was spawned, or the child was reaped before Start returned.
// The error reads exactly as the contract's message and also matches the context's own
// error, context.Canceled or context.DeadlineExceeded.
var ErrAbortedBeforeStart = errors.New("subagent request was aborted before the SDK child started")

// Options are the runtime dependencies of a Provider. The zero value is ready to use.
type Options struct {
	// Logger receives the post-publish failure warning of contract R-54 and debug diagnostics
	// (ladder steps, child stderr, ignored frames). Nil means no logging.
	Logger *zap.Logger
	// MaxFrameSize bounds one line read from a child; longer lines are discarded while
	// streaming. Zero means 16 MiB.
	MaxFrameSize int
}

// Provider is the SDK subprocess provider: a subagent.Provider whose runs are child runtime
// processes. It is safe for concurrent use; every run has its own process.
type Provider struct {
	cfg  resolved
	opts Options
	log  *zap.Logger
}

var _ subagent.Provider = (*Provider)(nil)

// New validates cfg (defaults applied, see Config.Validate) and returns the provider.
func New(cfg Config, opts Options) (*Provider, error) {
	r, err := cfg.withDefaults().resolve()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Provider{cfg: r, opts: opts, log: log}, nil
}

// Name returns the configured provider name.
func (p *Provider) Name() string { return p.cfg.ProviderName }

// Capabilities returns those of subagent.ProviderSDK: no optional capability (contract R-3), as
// the child runtime is configured on its own, not per request.
func (p *Provider) Capabilities() subagent.Capabilities {
	caps, _ := subagent.ProviderCapabilities(subagent.ProviderSDK)
	return caps
}

// Config returns the validated configuration, defaults applied.
func (p *Provider) Config() Config { return p.cfg.Config }

// RunOptions are per-run choices of StartRun. The zero value is ready to use.
type RunOptions struct {
	// ID is the run id (and the child's session id); "" means a fresh UUID. A caller that
	// must choose it deterministically (a Temporal workflow) passes it here.
	ID string
	// Logger, when set, replaces the provider's logger for this run's lines (the child's
	// lifecycle, its stderr, the failure warning of R-54), so they carry the caller's fields
	// such as a workflow id. The provider and run fields are added either way.
	Logger *zap.Logger
	// Sandbox is the delegating parent's sandbox mode ("" when it set none), and MaxDepth the
	// delegation depth that remains below the child (nil when uncapped): both are sent in
	// initialize, and the runtime enforces them on its tools and its own delegations.
	Sandbox  string
	MaxDepth *int64
	// Delegate, when set, runs the delegations the child's subagent tool asks for
	// (subagent/run requests); its error message is the child's tool result. Without it such
	// a request is answered "method not found".
	Delegate func(ctx context.Context, d Delegation) (subagent.Result, error)
	// Admit, when set, admits the child's model requests to the providers named in
	// AdmitProviders (sent in initialize): the runtime asks for a permit before each such
	// request, and Admit waits for it as it would for a request of the caller's own (a
	// worker's cluster-wide --model-concurrency). Permits the child still holds when the run
	// is disposed are released then.
	Admit          func(ctx context.Context, provider string) (release func(), err error)
	AdmitProviders []string
	// Digest configures the run's digest (Run.Digest), built from the events the runtime
	// reports of the run's session, and its progress's LastTool. The zero value builds a
	// full digest without nested runs' workflow ids.
	Digest subagent.DigestOptions
}

// Start is StartRun with zero RunOptions.
func (p *Provider) Start(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	r, err := p.StartRun(ctx, req, RunOptions{})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// StartRun publishes one run (contract R-52): it resolves the child's cwd (errors are
// *subagent.ValidationError), fails with an error matching ErrAbortedBeforeStart and ctx's
// own error without spawning when ctx is already done, spawns the child and completes the initialize handshake within the
// configured handshake timeout. When spawning, the handshake or ctx fails after the spawn,
// the child is stopped and reaped before StartRun returns (SIGKILLed at once when ctx is
// done); a child that exited on its own yields an *ExitError, a done ctx an error matching
// ErrAbortedBeforeStart, a handshake past its timeout a *HandshakeTimeoutError, an error
// answer of the runtime an error with the runtime's message unchanged (e.g. `no adapter
// registered for provider "x"`). The returned run owns the child: the caller must Dispose it.
func (p *Provider) StartRun(ctx context.Context, req subagent.Request, opts RunOptions) (*Run, error) {
	cwd, err := p.childCwd(req)
	if err != nil {
		return nil, err
	}
	if err := tools.CheckSandboxMode(opts.Sandbox); err != nil {
		return nil, fmt.Errorf("%s: %w", messagePrefix, err)
	}
	if opts.MaxDepth != nil && (*opts.MaxDepth < 0 || *opts.MaxDepth > session.MaxSafeInteger) {
		return nil, fmt.Errorf("%s: remaining maxDepth %d is not a non-negative safe integer", messagePrefix, *opts.MaxDepth)
	}
	if ctx.Err() != nil {
		return nil, subagent.AbortedBeforeStart(ctx, ErrAbortedBeforeStart)
	}
	id := opts.ID
	if id == "" {
		id = uuid.NewString()
	}
	log := opts.Logger
	if log == nil {
		log = p.log
	}
	log = log.With(zap.String("provider", p.Name()), zap.String("run", id))
	r := newRun(p, id, req.Prompt, log)
	r.digest = subagent.NewDigestBuilder(opts.Digest)
	handlers := delegateHandler(opts.Delegate)
	if opts.Admit != nil {
		r.permits = newPermits(opts.Admit)
		if handlers == nil {
			handlers = map[string]wire.Handler{}
		}
		maps.Copy(handlers, r.permits.handlers())
	}
	c, err := spawn(spawnOptions{
		command:      p.cfg.Command,
		args:         p.cfg.Args,
		dir:          cwd,
		env:          childEnv(os.Environ(), p.cfg.ChildEnv, p.cfg.Env),
		maxFrameSize: p.opts.MaxFrameSize,
		log:          log,
		onNotify:     r.events.push,
		handlers:     handlers,
	})
	if err != nil {
		return nil, err
	}
	r.child = c
	route := session.Route{Provider: p.cfg.Provider, Model: p.cfg.Model, MaxTokens: p.cfg.MaxTokens}.Override(req.AgentOptions)
	if err := p.handshake(ctx, c, cwd, route, opts); err != nil {
		// Reject only after the reap. The protocol never got going, so no shutdown request;
		// a done ctx (the caller gave up) skips the graceful steps: no session exists yet.
		stopErr := c.stop(ctx, ladderOptions{eofGrace: p.cfg.eofGrace, grace: p.cfg.grace})
		r.releasePermits()
		switch {
		case ctx.Err() != nil:
			err = subagent.AbortedBeforeStart(ctx, ErrAbortedBeforeStart)
		case errors.Is(err, wire.ErrInputClosed) || errors.Is(err, errChildExited):
			err = c.exitError()
		}
		return nil, errors.Join(err, stopErr)
	}
	return r, nil
}

// ChildCwd returns the working directory a run of req gets (contract R-51), or why it has none.
func (p *Provider) ChildCwd(req subagent.Request) (string, error) { return p.childCwd(req) }

// childCwd applies contract R-51: the configured cwd (resolved at load) wins, else the parent
// session's; the choice is checked again because a directory can vanish after load.
func (p *Provider) childCwd(req subagent.Request) (string, error) {
	opts := workdir.Options{Prefix: messagePrefix, ParentCwd: req.Parent.Cwd}
	if p.cfg.Cwd != nil {
		opts.ConfigCwd = &p.cfg.cwd
	}
	return workdir.Resolve(opts)
}

// errChildExited is the handshake's failure when the process exits before answering.
var errChildExited = errors.New("child exited during the handshake")

// handshake sends initialize exactly once and checks the server identity (contract R-61).
func (p *Provider) handshake(ctx context.Context, c *child, cwd string, route session.Route, opts RunOptions) error {
	params := wire.InitializeParams{Cwd: cwd, Provider: route.Provider, Model: route.Model, Sandbox: opts.Sandbox,
		Protected: p.cfg.Protected, Roots: p.cfg.Roots, HardLinkRoots: p.cfg.HardLinkRoots,
		TraceParent: telemetry.TraceParent(ctx)}
	if opts.Admit != nil {
		params.Admission = opts.AdmitProviders
	}
	if route.MaxTokens != 0 {
		params.MaxTokens = json.RawMessage(strconv.FormatInt(route.MaxTokens, 10))
	}
	if opts.MaxDepth != nil {
		params.MaxDepth = json.RawMessage(strconv.FormatInt(*opts.MaxDepth, 10))
	}
	var raw json.RawMessage
	done := make(chan error, 1)
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.NewTimer(p.cfg.handshakeTimeout)
	defer timer.Stop()
	go func() { done <- c.conn.Call(callCtx, wire.MethodInitialize, params, &raw) }()
	var err error
	select {
	case err = <-done:
	case <-c.exited:
		// A helper of the child may still hold its stdout open; the exit is what counts.
		err = errChildExited
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		return &HandshakeTimeoutError{Provider: p.Name(), PID: c.pid, Timeout: p.cfg.handshakeTimeout}
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %q: initialize: %w", messagePrefix, p.Name(), ctx.Err())
		}
		var we *wire.Error
		if errors.As(err, &we) && we.Rule() != "" {
			// The runtime refused the request itself (an unknown model provider, say).
			return &subagent.ValidationError{Rule: we.Rule(), Message: we.Message}
		}
		return err
	}
	var res struct {
		ServerInfo *struct {
			Name    *string `json:"name"`
			Version *string `json:"version"`
		} `json:"serverInfo"`
	}
	if json.Unmarshal(raw, &res) != nil || res.ServerInfo == nil || res.ServerInfo.Name == nil || res.ServerInfo.Version == nil {
		return fmt.Errorf("initialize returned no server identity: %s", compact(raw))
	}
	return nil
}

// HandshakeTimeoutError is StartRun's error when the child did not answer initialize within
// the handshake timeout (Config.HandshakeTimeoutMs). The child was reaped.
type HandshakeTimeoutError struct {
	Provider string
	PID      int
	Timeout  time.Duration
}

func (e *HandshakeTimeoutError) Error() string {
	return fmt.Sprintf("%s %q: initialize: the child runtime (pid %d) did not complete the handshake within %s; it was stopped",
		messagePrefix, e.Provider, e.PID, e.Timeout)
}

// compact renders raw JSON on one line for a message; absent renders as null.
func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var b []byte
	if buf, err := json.Marshal(raw); err == nil {
		b = buf
	} else {
		b = raw
	}
	return string(b)
}

// Delegation is one delegation a child runtime's subagent tool asks its caller to run.
type Delegation struct {
	ParentSessionID string // the asking child's session
	CallID          string // the tool call that asked, unique within the child's turn
	Provider        string // the provider the child asked for; "" means the caller's default
	Request         subagent.Request
}

// delegateHandler answers the child's subagent/run requests with delegate; nil registers
// nothing.
func delegateHandler(delegate func(context.Context, Delegation) (subagent.Result, error)) map[string]wire.Handler {
	if delegate == nil {
		return nil
	}
	return map[string]wire.Handler{wire.MethodSubagentRun: func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p wire.SubagentRunParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, &wire.Error{Code: wire.CodeInternalError, Message: "subagent/run: invalid params: " + err.Error()}
		}
		res, err := delegate(ctx, Delegation{ParentSessionID: p.ParentSessionID, CallID: p.CallID, Provider: p.Provider, Request: p.Request})
		if err != nil {
			return nil, err
		}
		return wire.SubagentRunResult{Result: res}, nil
	}}
}
