package inprocess

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

// DelegatedContext is the runtime-context statement of every child (contract R-24). It reaches the
// model through the runtime context, never the system prompt.
const DelegatedContext = "You are a delegated subagent: your permission scope was fixed when you were started and cannot be widened from inside this session — operations that require approval are rejected automatically. When the task needs access beyond that scope, do not retry the denied operation; state the limitation in your reply so the delegating agent can handle it."

// DelegatedContextOrder is the order of DelegatedContext among runtime-context statements.
const DelegatedContextOrder = 120

// Phases of a drive, as Progress reports them.
const (
	PhaseRunning = "running"
	PhaseIdle    = "idle"
)

// Progress is what a drive reports while it runs (contract R-73): subagent.Progress, the one
// progress type. Steps counts the steps started by this drive and the drives before it; Tail
// is the end of the text streamed in the latest step.
type Progress = subagent.Progress

// DriveRequest asks Drive to run a child's turn.
type DriveRequest struct {
	ChildID string
	// Provider names the variant in the descriptor; empty means fork for a seeded child,
	// spawn otherwise.
	Provider string
	// Request is the delegation the child was created for (Create): its prompt, persona,
	// tool filter and output schema are installed again by every drive.
	Request subagent.Request
	// OnProgress, when set, is called after every event the child appends, on the
	// appending goroutine: it must return quickly and must not call into the child.
	OnProgress func(Progress)
	// Tools are registered in the child's own tool scope for this drive only, and revoked
	// at teardown: tools bound to the drive (a subagent tool that delegates from this very
	// child). Their names must not be those of global tools. Like the global tools they obey
	// the request's tool filter: a tool it does not allow is not registered. Create must
	// have been told their names (CreateRequest.RunTools) for the filter to name them.
	Tools []tools.Tool
	// Digest is the level of the progress's LastTool (subagent.DigestBuilder.LastTool):
	// "" is subagent.DigestFull, subagent.DigestOff leaves it empty.
	Digest subagent.DigestLevel
	// Store, when set, is what the child reads and appends through for this drive instead of
	// the Host's store: a session lease's fenced view (session.Lease.Store), so a drive that
	// lost its lease to another holder writes nothing more.
	Store session.Store
}

// child is a child agent opened by this Host, with what the drive installed on it.
type child struct {
	id       string
	host     *Host
	agent    *agent.Agent
	provider string
	queued   bool // the log already holds the prompt's splice
	revoke   []func()

	progressMu sync.Mutex
	progress   Progress
	digest     *subagent.DigestBuilder // for the progress's current step and last tool

	closeOnce sync.Once
	closeErr  error
}

// Drive runs the child's one turn (contract R-27): it opens the child from the store, installs
// the runtime-only setup (persona, tool filter, structured output, delegated runtime context,
// descriptor hook), publishes it in the live registry, queues the prompt — or, when the log
// already holds the prompt, resumes the unfinished turn without redoing stored tool calls —
// and waits until the child is idle. Then it tears the child down and returns the final
// progress.
//
// Cancelling ctx aborts the turn with cause parent; Drive still waits for the turn/end to be
// written and then returns ctx's error. A model request that fails with a retryable error (a
// timeout, model.IsRetryable) leaves the turn unfinished and Drive returns an
// *InterruptedError: the next Drive of the child resumes the turn. A session write the store
// fails (wrapping an *agent.StoreError, which names the session and the operation) leaves the
// turn unfinished too, with no turn/end: the next Drive resumes it, not redoing stored steps.
// Other errors are infrastructure faults as well: a child-level failure is a turn/end in the
// log, for ReadResult.
func (h *Host) Drive(ctx context.Context, dr DriveRequest) (Progress, error) {
	c, err := h.open(ctx, dr, true)
	if err != nil {
		return Progress{}, err
	}
	if err := h.publish(c); err != nil {
		_ = c.close(context.Background())
		return Progress{}, err
	}
	runErr := c.run(ctx, dr.Request.Prompt)
	interruption := c.agent.Interruption()
	closeErr := c.close(context.Background())
	p := c.snapshot()
	if err := errors.Join(runErr, closeErr); err != nil {
		return p, err
	}
	if interruption != nil && ctx.Err() == nil {
		return p, &InterruptedError{ChildID: dr.ChildID, Err: interruption}
	}
	if err := ctx.Err(); err != nil {
		return p, fmt.Errorf("inprocess: drive %s: %w", dr.ChildID, err)
	}
	return p, nil
}

// InterruptedError is Drive's error when a retryable model failure left the child's turn
// unfinished: drive the child again to resume it.
type InterruptedError struct {
	ChildID string
	Err     error // the model's failure
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("inprocess: drive %s: the turn was interrupted and resumes on the next drive: %v", e.ChildID, e.Err)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// open opens the child agent and installs the runtime-only setup; interrupt is
// agent.Options.InterruptOnRetryable. On failure nothing stays open.
func (h *Host) open(ctx context.Context, dr DriveRequest, interrupt bool) (_ *child, err error) {
	store := h.store
	if dr.Store != nil {
		store = dr.Store
	}
	hd, events, err := store.Load(ctx, dr.ChildID)
	if err != nil {
		return nil, fmt.Errorf("inprocess: open child %s: %w", dr.ChildID, err)
	}
	if hd.Origin != session.OriginSubagent {
		return nil, fmt.Errorf("inprocess: open child %s: the session is not a subagent child", dr.ChildID)
	}
	preset, err := h.preset(hd.AgentPreset)
	if err != nil {
		return nil, fmt.Errorf("inprocess: open child %s: %w", dr.ChildID, err)
	}
	a, err := agent.Open(ctx, agent.Options{
		Store: store, SessionID: dr.ChildID, Models: h.models, Tools: h.tools, Preset: preset, Logger: h.log,
		InterruptOnRetryable: interrupt, Protected: h.protected, Roots: h.roots, HardLinkRoots: h.links,
	})
	if err != nil {
		return nil, fmt.Errorf("inprocess: open child %s: %w", dr.ChildID, err)
	}
	c := &child{id: dr.ChildID, host: h, agent: a, provider: dr.Provider}
	if dr.Digest != subagent.DigestOff {
		c.digest = subagent.NewDigestBuilder(subagent.DigestOptions{Level: dr.Digest})
	}
	defer func() {
		if err != nil {
			_ = c.close(context.Background())
		}
	}()
	own := ownEvents(hd, events)
	if c.provider == "" {
		c.provider = subagent.ProviderSpawn
		if hd.SeedLength > 0 {
			c.provider = subagent.ProviderFork
		}
	}
	req := dr.Request
	if req.Persona != "" {
		a.SetPersona(req.Persona)
	}
	if err := restrict(a.Scope(), h.tools, req.ToolFilter, namesOf(dr.Tools)); err != nil {
		return nil, err
	}
	for _, t := range dr.Tools {
		if !runToolAllowed(req.ToolFilter, t.Name) {
			continue
		}
		revoke, err := a.Scope().Register(t)
		if err != nil {
			return nil, fmt.Errorf("inprocess: open child %s: %w", dr.ChildID, err)
		}
		c.revoke = append(c.revoke, revoke)
	}
	if req.HasOutputSchema() {
		value, err := committedValue(own)
		if err != nil {
			return nil, fmt.Errorf("inprocess: open child %s: %w", dr.ChildID, err)
		}
		revoke, err := installStructured(a, req.OutputSchema, value != nil)
		if err != nil {
			return nil, err
		}
		c.revoke = append(c.revoke, revoke)
		if value != nil && a.Pending() {
			// The value was committed by a drive that died before its step ended: end the
			// turn after the step the resumption finishes.
			a.ConcludeAfterStep()
		}
	}
	a.AddContext(agent.Statement{Order: DelegatedContextOrder, Text: DelegatedContext})

	var described atomic.Bool
	for _, ev := range own {
		switch ev.Type {
		case session.TypeSubagentDescr:
			described.Store(true)
		case session.TypeInboxSpliced:
			c.queued = true
		}
		c.observe(ev)
	}
	descriptor, err := session.NewEvent(session.TypeSubagentDescr, subagent.NewDescriptor(c.provider, req.Label))
	if err != nil {
		return nil, fmt.Errorf("inprocess: open child %s: %w", dr.ChildID, err)
	}
	// The descriptor goes inside the first step the child enters, once: a turn refused before
	// any step gets none, a resumed child that has one gets no second.
	a.OnStepStart(func(_, _ int) []session.Event {
		if described.Swap(true) {
			return nil
		}
		return []session.Event{descriptor}
	})
	unsubscribe := a.Subscribe(func(ev session.Event) {
		c.observe(ev)
		if dr.OnProgress != nil {
			dr.OnProgress(c.snapshot())
		}
	})
	c.revoke = append(c.revoke, unsubscribe)
	return c, nil
}

// run queues the prompt (or resumes) unless ctx is already done, aborts the turn with cause
// parent when ctx ends, and waits until the child is idle.
func (c *child) run(ctx context.Context, prompt []session.Block) error {
	c.setPhase(PhaseRunning)
	defer c.setPhase(PhaseIdle)
	if ctx.Err() == nil {
		var err error
		switch {
		case !c.queued:
			_, err = c.agent.Followup(ctx, prompt)
		case c.agent.Pending():
			err = c.agent.Resume(ctx)
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("inprocess: drive %s: %w", c.id, err)
		}
	}
	stop := context.AfterFunc(ctx, func() { c.agent.Cancel(session.CauseParent) })
	defer stop()
	// Waiting is bounded by the turn itself: a cancel ends it, and the agent writes its
	// turn/end whatever ctx says.
	if err := c.agent.WhenIdle(context.Background()); err != nil {
		return err
	}
	// A turn a session write of which failed (the store was unreachable, or the drive's
	// lease was taken over) is left pending in the log: an infrastructure fault, so the
	// drive fails and its retry resumes the turn, rather than reporting a turn with no end.
	if err := c.agent.EndFailure(); err != nil {
		return fmt.Errorf("inprocess: drive %s: the turn was left unfinished: %w", c.id, err)
	}
	return nil
}

// close tears the child down: out of the live registry, loop stopped, scoped registrations
// revoked. It is idempotent and returns the first call's outcome.
func (c *child) close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.host.unpublish(c)
		c.closeErr = c.agent.Close(ctx)
		for i := len(c.revoke) - 1; i >= 0; i-- {
			c.revoke[i]()
		}
		if c.closeErr != nil {
			c.host.log.Error("inprocess: child teardown failed", zap.String("child", c.id), zap.Error(c.closeErr))
		}
	})
	return c.closeErr
}

// observe updates the progress with one of the child's own events.
func (c *child) observe(ev session.Event) {
	c.progressMu.Lock()
	defer c.progressMu.Unlock()
	p := &c.progress
	if c.digest != nil {
		c.digest.Add(ev)
		p.LastTool = c.digest.LastTool()
	}
	switch ev.Type {
	case session.TypeStepStart:
		p.Steps++
		p.Tail = ""
	case session.TypeAssistantChunk:
		var d session.AssistantChunkData
		if ev.Decode(&d) == nil {
			p.StreamedBytes += int64(len(d.Chunk.Text))
			p.Tail = subagent.Tail(p.Tail + d.Chunk.Text)
		}
	case session.TypeAssistantMessage:
		var d session.AssistantMessageData
		if ev.Decode(&d) == nil && d.Usage != nil {
			p.OutputTokens += d.Usage.OutputTokens
		}
	}
}

func (c *child) setPhase(phase string) {
	c.progressMu.Lock()
	c.progress.Phase = phase
	c.progressMu.Unlock()
}

func (c *child) snapshot() Progress {
	c.progressMu.Lock()
	defer c.progressMu.Unlock()
	return c.progress
}

// ownEvents returns the child's own events: the log from seedLength on (contract R-28).
func ownEvents(hd session.Header, events []session.Event) []session.Event {
	return events[min(hd.SeedLength, int64(len(events))):]
}
