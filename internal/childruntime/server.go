// Package childruntime is the child runtime of the SDK subprocess provider: a full agent runtime
// (sessions in its own file store, model routing, built-in tools) served over JSON-RPC 2.0 on
// stdio (contract …R-64).
//
// A client sends `initialize` once, then `session/prompt` for any number of sessions, and
// finally `shutdown` (or closes stdin, or signals the process). Every event of every session
// the runtime opens is sent as a `session.event` notification, in seq order, and each session
// reports `session.status` `running` when a prompt gives it work and `idle` once, right after
// the `turn/end` of the last queued prompt was sent.
//
// Stdout carries frames only; diagnostics go to Options.Err.
//
// Every session has the `subagent` tool: a call is sent to the client as a `subagent/run`
// request (a subflow extension), announced by `subagent.started` and closed by
// `subagent.finished` with the run's stop reason. The client runs the delegation where it
// keeps its delegation tree (a subflow worker: as a child workflow of the sdk run).
package childruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/internal/wire"
	"github.com/subflow-dev/subflow/subagent"
)

// Exit codes besides 0 (a graceful end: shutdown, stdin EOF, SIGTERM or ctx done).
const (
	// ExitUsage: the runtime could not be set up (bad options, bad config file, bad flags).
	ExitUsage = 2
	// ExitInterrupted is what Main returns after SIGINT.
	ExitInterrupted = 130
)

// DefaultVersion is reported in serverInfo when Options.Version is empty.
const DefaultVersion = "dev"

// DefaultSessionRoot returns where the runtime keeps its sessions when Options.SessionRoot is
// empty: $XDG_STATE_HOME/subflow/sdk-sessions, else ~/.local/state/subflow/sdk-sessions. It is
// private to the runtime: outside every cwd a client may send (unless that cwd contains the
// home directory), and the file tools refuse it whatever the cwd.
func DefaultSessionRoot() (string, error) {
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("server: session root: %w (pass --session-root)", err)
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "subflow", "sdk-sessions"), nil
}

// closeTimeout bounds how long disposing the agents may take at shutdown; the client's dispose
// ladder escalates to signals after its own grace periods anyway.
const closeTimeout = 2 * time.Second

// Options configure Run.
type Options struct {
	In  io.Reader // frames from the client; EOF ends the runtime gracefully
	Out io.Writer // frames to the client, nothing else
	Err io.Writer // diagnostics; nil discards them unless Logger is set

	// Models routes sessions to model adapters; nil means model.NewDefaultRegistry().
	Models *model.Registry
	// Presets add to or replace the built-in presets by name. New sessions use the preset
	// named agent.DefaultPresetName (agent.DefaultPreset() unless replaced here or in the config).
	Presets map[string]agent.Preset
	// ConfigPath optionally names a JSON presets file in the format of agent.LoadPresets; its
	// presets win over Presets.
	ConfigPath string
	// Version is reported in serverInfo; "" means DefaultVersion.
	Version string
	// SessionRoot is the directory of the runtime's own session store (created 0700 if
	// absent); "" means DefaultSessionRoot. Never under a tool root: the file tools refuse it.
	SessionRoot string
	// Logger receives diagnostics; nil logs JSON lines to Err.
	Logger *zap.Logger
	// SubagentMaxDepth is the depth cap of the sessions' subagent tool; the zero value is
	// subagent.DefaultMaxDepth.
	SubagentMaxDepth subagent.MaxDepthSetting
}

// Run serves one client until `shutdown`, the end of In, or ctx being done, then disposes every
// agent (a running turn ends aborted, cause disposed), makes the logs durable, sends the
// notifications still queued and returns 0. It returns ExitUsage when the options cannot be
// used.
func Run(ctx context.Context, opts Options) int {
	log := opts.Logger
	if log == nil {
		log = newLogger(opts.Err)
	}
	if opts.In == nil || opts.Out == nil {
		log.Error("server: In and Out are required")
		return ExitUsage
	}
	s, err := newServer(opts, log)
	if err != nil {
		log.Error("server: cannot start", zap.Error(err))
		return ExitUsage
	}
	go s.out.run()
	inputDone := make(chan struct{})
	go s.readLoop(wire.NewDecoder(opts.In, wire.DecoderOptions{
		OnDiscard: func(err error) {
			log.Warn("server: discarded input line", zap.Error(err))
		},
		// A request the runtime cannot read still gets its answer (docs/protocol.md), so
		// its caller does not wait for one forever.
		OnBadRequest: func(id json.RawMessage, werr *wire.Error) {
			go s.answer(&wire.Message{ID: id, Error: werr}, "")
		},
	}), inputDone)

	select {
	case <-s.stop:
		log.Debug("server: shutdown requested")
	case <-inputDone:
		log.Debug("server: input closed")
	case <-ctx.Done():
		log.Debug("server: stopped", zap.Error(context.Cause(ctx)))
	}
	s.dispose()
	return 0
}

// handler answers one request.
type handler func(ctx context.Context, params json.RawMessage) (any, error)

// server is the state of one Run.
type server struct {
	log      *zap.Logger
	version  string
	models   *model.Registry
	tools    *tools.Registry
	preset   agent.Preset
	enc      *wire.Encoder
	out      *outbox
	handlers map[string]handler
	// subagentCap is the depth cap of the sessions' subagent tool.
	subagentCap subagent.MaxDepthSetting

	// inFlight are the ids of the requests being served: a second request with one of them
	// is refused, not run twice.
	inFlight wire.InFlight

	callsMu sync.Mutex
	calls   clientCalls

	ctx    context.Context // handlers' context; cancelled by dispose
	cancel context.CancelFunc

	stopOnce sync.Once
	stop     chan struct{} // closed once the shutdown reply was written

	// mu guards the fields below. Prompt handling holds it throughout, so that no agent is
	// opened or given work after dispose took its snapshot.
	mu          sync.Mutex
	route       *session.Route // set by initialize
	cwd         string
	sandbox     string   // the delegating parent's sandbox mode, set by initialize
	maxDepth    *int64   // the remaining delegation depth, set by initialize
	sessionRoot string   // Options.SessionRoot or DefaultSessionRoot
	protected   []string // sessionRoot and the client's state directories, set by initialize
	roots       []string // the client's workspace roots, set by initialize
	// hardLinkRoots are the roots whose hard links the client trusts, set by initialize.
	hardLinkRoots []string
	traceParent   string // the delegating run's span, set by initialize ("" when untraced)
	store         *filestore.Store
	sessions      map[string]*sessionState
	shuttingDown  bool
}

func newServer(opts Options, log *zap.Logger) (*server, error) {
	presets := make(map[string]agent.Preset, len(opts.Presets))
	for name, p := range opts.Presets {
		presets[name] = p
	}
	if opts.ConfigPath != "" {
		file, err := agent.LoadPresets(opts.ConfigPath)
		if err != nil {
			return nil, err
		}
		for name, p := range file {
			presets[name] = p
		}
	}
	preset, ok := presets[agent.DefaultPresetName]
	if !ok {
		preset = agent.DefaultPreset()
	}
	preset.Name = agent.DefaultPresetName

	reg := &tools.Registry{}
	if err := tools.RegisterBuiltins(reg); err != nil {
		return nil, err
	}
	models := opts.Models
	if models == nil {
		models = model.NewDefaultRegistry()
	}
	version := opts.Version
	if version == "" {
		version = DefaultVersion
	}
	root := opts.SessionRoot
	if root == "" {
		var err error
		if root, err = DefaultSessionRoot(); err != nil {
			return nil, err
		}
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("server: session root %q: %w", opts.SessionRoot, err)
	}
	enc := wire.NewEncoder(opts.Out)
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{
		log:      log,
		version:  version,
		models:   models,
		tools:    reg,
		preset:   preset,
		enc:      enc,
		out:      newOutbox(enc, log),
		ctx:      ctx,
		cancel:   cancel,
		stop:     make(chan struct{}),
		sessions: make(map[string]*sessionState),

		sessionRoot: root,
		calls:       clientCalls{pending: make(map[string]chan *wire.Message)},
		subagentCap: opts.SubagentMaxDepth,
	}
	s.handlers = map[string]handler{
		wire.MethodInitialize:    s.initialize,
		wire.MethodSessionPrompt: s.prompt,
		wire.MethodShutdown:      s.shutdown,
	}
	return s, nil
}

// readLoop serves requests and delivers the responses to the runtime's own calls until the
// input ends. Notifications from the client are ignored.
func (s *server) readLoop(dec *wire.Decoder, done chan<- struct{}) {
	defer close(done)
	defer s.clientGone()
	for {
		m, err := dec.Decode()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Warn("server: read failed", zap.Error(err))
			}
			return
		}
		switch m.Kind() {
		case wire.KindRequest:
			// Checked here, in reading order, so of two requests with one id the second is
			// the one refused.
			if werr := s.inFlight.Begin(m.ID); werr != nil {
				go s.answer(&wire.Message{ID: m.ID, Error: werr}, m.Method)
				continue
			}
			go s.serve(m)
		case wire.KindResponse:
			s.deliverResponse(m)
		}
	}
}

// serve answers one request. It is written here rather than with wire.Conn because the
// runtime must know when the shutdown reply has been written: only then may it exit.
func (s *server) serve(req *wire.Message) {
	defer s.inFlight.End(req.ID)
	resp := &wire.Message{ID: req.ID}
	result, err := s.call(req.Method, req.Params)
	if err == nil {
		resp.Result, err = json.Marshal(result)
		if err != nil {
			err = fmt.Errorf("server: encode result of %s: %w", req.Method, err)
		}
	}
	if err != nil {
		resp.Result, resp.Error = nil, toWireError(err)
	}
	s.answer(resp, req.Method)
	if req.Method == wire.MethodShutdown && err == nil {
		s.stopOnce.Do(func() { close(s.stop) })
	}
}

// answer writes the response resp to a request of method ("" when unknown).
func (s *server) answer(resp *wire.Message, method string) {
	if werr := s.enc.Encode(resp); werr != nil {
		s.log.Warn("server: write response failed", zap.String("method", method), zap.Error(werr))
	}
}

// call runs the method's handler. A panicking handler is logged with its stack and answered
// with -32603, so it cannot take the runtime down silently.
func (s *server) call(method string, params json.RawMessage) (result any, err error) {
	h, ok := s.handlers[method]
	if !ok {
		return nil, &wire.Error{Code: wire.CodeMethodNotFound, Message: "method not found: " + method}
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("server: handler panicked", zap.String("method", method),
				zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			result, err = nil, fmt.Errorf("server: internal error in %s: %v", method, r)
		}
	}()
	return h(s.ctx, params)
}

// toWireError sends a *wire.Error as is and any other error as -32603 with its message.
func toWireError(err error) *wire.Error {
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	return &wire.Error{Code: wire.CodeInternalError, Message: err.Error()}
}

// dispose ends the runtime: no new prompts, every agent closed (running turns end aborted,
// cause disposed), logs synced, the store closed and the queued notifications written.
func (s *server) dispose() {
	s.mu.Lock()
	s.shuttingDown = true
	sessions := make([]*sessionState, 0, len(s.sessions))
	for _, st := range s.sessions {
		sessions = append(sessions, st)
	}
	store := s.store
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, st := range sessions {
		wg.Go(func() {
			if err := st.agent.Close(ctx); err != nil {
				s.log.Error("server: dispose agent", zap.String("session", st.id), zap.Error(err))
			}
			if err := store.Sync(ctx, st.id); err != nil {
				s.log.Error("server: sync session", zap.String("session", st.id), zap.Error(err))
			}
		})
	}
	wg.Wait()
	s.cancel()
	if store != nil {
		if err := store.Close(); err != nil {
			s.log.Error("server: close session store", zap.Error(err))
		}
	}
	s.out.close()
}

// newLogger logs JSON lines at info level and above to w; nil w logs nothing.
func newLogger(w io.Writer) *zap.Logger {
	if w == nil {
		return zap.NewNop()
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), zapcore.InfoLevel))
}
