// Package agent is the agent runtime: a session-backed turn loop that sends the conversation to
// a model, streams its answer into the session log, runs the tools it asks for and repeats until
// the model answers without tool calls.
//
// An Agent owns the log of one session while it is open: every event it appends gets the next
// seq, is written to the store and is delivered to subscribers, in that order. Callers set the
// agent up (persona, sections, runtime context, setup events, tool scope) before its first
// turn, then queue user messages with Followup and wait with WhenIdle.
package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
)

// DefaultStepLimit is the number of steps a turn may take when Options.StepLimit is 0.
const DefaultStepLimit = 50

// ErrClosed is returned by the methods that queue work on a closed agent.
var ErrClosed = errors.New("agent: closed")

// ErrNotPending is returned by Resume when the session log does not end inside a turn.
var ErrNotPending = errors.New("agent: no unfinished turn to resume")

// Options configure Open.
type Options struct {
	Store     session.Store
	SessionID string
	Models    *model.Registry
	Tools     *tools.Registry
	// Preset gives the agent's tools and initial prompt sections. The zero Preset means every
	// registry tool and no sections.
	Preset Preset
	// StepLimit caps the steps of one turn; 0 means DefaultStepLimit.
	StepLimit int
	// Logger receives diagnostics; nil logs nothing.
	Logger *zap.Logger
	// InterruptOnRetryable makes a model request that fails with a retryable error
	// (model.IsRetryable: a timeout) leave its turn unfinished instead of ending it `error`:
	// the agent writes no turn/end, syncs the log and goes idle with Interruption set, and the
	// turn continues with Resume — in this agent or in one another process opens on the
	// session. Likewise a log write of the turn that the store fails (an append or a sync; a
	// *StoreError) leaves the turn unfinished, with no turn/end, and EndFailure set. For
	// drivers that retry (a Temporal activity); others keep the default, under which such a
	// turn ends `error` (when the turn/end itself can still be written).
	InterruptOnRetryable bool
	// Protected are directories the file tools refuse whatever the cwd (tools.Env.Protected):
	// the session stores.
	Protected []string
	// Roots are the workspace roots the cwd must resolve under (tools.Env.Roots); empty
	// means any cwd.
	Roots []string
	// HardLinkRoots are the roots whose hard links are trusted (tools.Env.HardLinkRoots).
	HardLinkRoots []string
}

// Agent runs turns for one session. Its methods are safe for concurrent use.
type Agent struct {
	store     session.Store
	models    *model.Registry
	header    session.Header
	scope     *tools.Scope
	stepLimit int
	log       *zap.Logger
	protected []string
	roots     []string
	links     []string // Options.HardLinkRoots
	interrupt bool     // Options.InterruptOnRetryable

	// logMu serialises appends: seq assignment, the store write, state and subscriber
	// delivery happen together so subscribers see exactly the log, in order.
	logMu     sync.Mutex
	st        *state
	subs      map[int]func(session.Event)
	nextSub   int
	suspended bool // set by Suspend: no more appends

	promptMu   sync.Mutex
	sections   []Section
	statements []Statement
	system     string          // rendered sections, "" when stale
	contextMsg []model.Message // rendered statements, nil when stale

	hookMu     sync.Mutex
	stepHooks  []func(turn, step int) []session.Event
	concludeMu sync.Mutex
	conclude   bool

	// mu guards the inbox and the loop's run state.
	mu          sync.Mutex
	queue       []session.UserMessage
	resumeAsked bool
	running     bool
	cancelTurn  context.CancelCauseFunc
	cancelNext  string            // cause for a turn that starts before the loop took its work
	turnParent  trace.SpanContext // parent of the turns' spans (traceParentLocked)
	idle        chan struct{}     // closed while no work is queued or running
	wake        chan struct{}
	closed      bool
	done        chan struct{} // closed when the loop goroutine returns
	interrupted error         // see Interruption
	endFailure  error         // see EndFailure
}

// Open loads the session from the store, rebuilds the agent's state from its log (next seq,
// turn counter, conversation history, sandbox mode and approval policy) and starts the loop.
// The session must exist: callers create new sessions with Store.Create first. Events that must
// precede the first turn (a fork seed, the end-seed marker) may be appended to the store
// directly before Open, or through Agent.Append after it.
func Open(ctx context.Context, opts Options) (*Agent, error) {
	if opts.Store == nil || opts.Models == nil || opts.Tools == nil {
		return nil, fmt.Errorf("agent: open %s: Store, Models and Tools are required", opts.SessionID)
	}
	h, events, err := opts.Store.Load(ctx, opts.SessionID)
	if err != nil {
		return nil, fmt.Errorf("agent: open %s: %w", opts.SessionID, err)
	}
	st, err := replay(events)
	if err != nil {
		return nil, fmt.Errorf("agent: open %s: %w", opts.SessionID, err)
	}
	scope, err := newScope(opts.Tools, opts.Preset)
	if err != nil {
		return nil, fmt.Errorf("agent: open %s: %w", opts.SessionID, err)
	}
	a := &Agent{
		store:     opts.Store,
		models:    opts.Models,
		header:    h,
		scope:     scope,
		stepLimit: opts.StepLimit,
		log:       opts.Logger,
		protected: append([]string(nil), opts.Protected...),
		roots:     append([]string(nil), opts.Roots...),
		links:     append([]string(nil), opts.HardLinkRoots...),
		interrupt: opts.InterruptOnRetryable,
		st:        st,
		subs:      make(map[int]func(session.Event)),
		sections:  append([]Section(nil), opts.Preset.Sections...),
		idle:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	if a.stepLimit <= 0 {
		a.stepLimit = DefaultStepLimit
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	a.log = a.log.With(zap.String("session", h.ID))
	close(a.idle)
	go a.loop()
	return a, nil
}

// Header returns the session header.
func (a *Agent) Header() session.Header { return a.header }

// SessionID returns the session id.
func (a *Agent) SessionID() string { return a.header.ID }

// Scope returns the agent's own tool scope: flat (restrictions of other agents do not apply),
// restricted to the preset's tools. Callers may restrict it further, register scoped tools,
// guards and observers on it before the first turn.
func (a *Agent) Scope() *tools.Scope { return a.scope }

// Pending reports whether the session log ends inside a turn that no loop is running (the
// process that ran it died). Resume continues it; a Followup resumes it first.
func (a *Agent) Pending() bool {
	a.mu.Lock()
	running := a.running
	a.mu.Unlock()
	return !running && a.logPending()
}

// EndFailure returns the store failure (a *StoreError: the store was unreachable, or refused
// the write — a lease taken over) that left the latest turn without its turn/end, or nil:
// the splice, turn/start or turn/end could not be written, or, under
// Options.InterruptOnRetryable, any write of the turn. Such a turn stays pending in the log
// for the next process to resume. Queuing work (Followup, Resume) clears it.
func (a *Agent) EndFailure() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.endFailure
}

// Interruption returns the retryable model failure that left the latest turn unfinished
// (Options.InterruptOnRetryable), or nil when that turn was not interrupted. Queuing work
// (Followup, Resume) clears it.
func (a *Agent) Interruption() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.interrupted
}

// OnStepStart registers fn to run at every step/start; the events it returns (Type and Data
// set, as from session.NewEvent) are appended right after that step/start. A resumed turn
// runs the hooks for the steps it starts, not for steps already in the log.
func (a *Agent) OnStepStart(fn func(turn, step int) []session.Event) {
	a.hookMu.Lock()
	defer a.hookMu.Unlock()
	a.stepHooks = append(a.stepHooks, fn)
}

// ConcludeAfterStep asks the running turn to end `completed` after the current step, without
// another model request, even if the step ran tool calls. Tool handlers and observers call it
// during a step (structured output: the step that committed the value ends the turn). A call
// made outside a step is forgotten when the next step starts.
func (a *Agent) ConcludeAfterStep() {
	a.concludeMu.Lock()
	a.conclude = true
	a.concludeMu.Unlock()
}

// takeConclude reports and clears a ConcludeAfterStep request.
func (a *Agent) takeConclude() bool {
	a.concludeMu.Lock()
	defer a.concludeMu.Unlock()
	c := a.conclude
	a.conclude = false
	return c
}

// env is what the tool calls of this agent see, with the latest sandbox mode and approval
// policy of the log.
func (a *Agent) env() tools.Env {
	a.logMu.Lock()
	defer a.logMu.Unlock()
	return tools.Env{
		SessionID:      a.header.ID,
		Cwd:            a.header.Cwd,
		SandboxMode:    a.st.sandbox,
		ApprovalPolicy: a.st.approval,
		Protected:      a.protected,
		Roots:          a.roots,
		HardLinkRoots:  a.links,
	}
}

// Close cancels a running turn with cause `disposed`, stops the loop and waits for it to
// return. Queued messages that no turn took are dropped. Close is idempotent; it fails only
// when ctx ends before the loop stopped.
func (a *Agent) Close(ctx context.Context) error {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		if a.cancelTurn != nil {
			a.cancelTurn(abortCause(session.CauseDisposed))
		}
		a.signal()
	}
	a.mu.Unlock()
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("agent: close %s: %w", a.header.ID, ctx.Err())
	}
}

// newScope returns a fresh flat scope over reg, restricted to the preset's tools.
func newScope(reg *tools.Registry, p Preset) (*tools.Scope, error) {
	scope := tools.NewScope(reg)
	if len(p.Tools) > 0 {
		if err := scope.Restrict(p.Tools, nil); err != nil {
			return nil, fmt.Errorf("preset %q: %w", p.Name, err)
		}
	}
	return scope, nil
}
