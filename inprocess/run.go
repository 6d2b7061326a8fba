package inprocess

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

// StartOptions configure Start.
type StartOptions struct {
	// Provider is subagent.ProviderSpawn (the default when empty) or subagent.ProviderFork.
	Provider string
	// ChildID is the child session id; empty means a fresh UUID.
	ChildID string
	// RuntimeDepth is the parent agent's runtime delegation depth (contract R-5); nil is none.
	RuntimeDepth *float64
	// Tools are registered in the child's own scope for the run, as DriveRequest.Tools.
	Tools []tools.Tool
}

// Start delegates req to a new child of req.Parent.SessionID and returns once the child is
// published (contract R-20): created in the store, set up, and live on this Host. The child then
// runs its turn in the background; Run.Result waits for it.
//
// ctx is the run's abort signal, not only Start's: cancelling it before publication fails
// Start with ErrAbortedBeforePublication and leaves nothing behind; cancelling it later
// aborts the child's turn (cause parent) and settles an unfinished result as aborted.
func (h *Host) Start(ctx context.Context, req subagent.Request, opts StartOptions) (*Run, error) {
	if opts.Provider == "" {
		opts.Provider = subagent.ProviderSpawn
	}
	created, err := h.Create(ctx, CreateRequest{
		Provider: opts.Provider, ChildID: opts.ChildID, Request: req, RuntimeDepth: opts.RuntimeDepth,
		RunTools: namesOf(opts.Tools),
	})
	if err != nil {
		return nil, err
	}
	id := created.ChildID
	// No driver retries a library run: a retryable model failure, or a session write the store
	// fails, ends the turn `error`.
	c, err := h.open(ctx, DriveRequest{ChildID: id, Provider: opts.Provider, Request: req, Tools: opts.Tools}, false)
	if err != nil {
		h.rollback(id)
		return nil, err
	}
	if ctx.Err() != nil {
		err = subagent.AbortedBeforeStart(ctx, ErrAbortedBeforePublication)
	} else {
		err = h.publish(c)
	}
	if err != nil {
		_ = c.close(context.Background())
		h.rollback(id)
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.Background())
	r := &Run{
		host: h, child: c, depth: created.Depth, req: req, startCtx: ctx,
		cancel: cancel, done: make(chan struct{}),
	}
	r.stopListening = afterFunc(ctx, r.abort)
	// A cancel that landed between publication and the listener above must not be lost:
	// the drive then queues nothing and the result is [] / aborted.
	if ctx.Err() != nil {
		r.abort()
	}
	go r.drive(runCtx)
	return r, nil
}

// Run is one published in-process delegation. It implements subagent.Run.
type Run struct {
	host  *Host
	child *child
	depth int64
	req   subagent.Request

	startCtx      context.Context // Start's ctx: the run's abort signal
	cancel        context.CancelFunc
	stopListening func() bool
	cancelled     atomic.Bool // set by abort
	disposeOnce   sync.Once

	done        chan struct{} // closed once result, resultErr and teardownErr are set
	result      subagent.Result
	resultErr   error
	teardownErr error
}

// ID returns the child session id.
func (r *Run) ID() string { return r.child.id }

// Depth returns the child's delegation depth.
func (r *Run) Depth() int64 { return r.depth }

// Result waits for the run's result. ctx bounds only the wait: its end does not stop the run.
func (r *Run) Result(ctx context.Context) (subagent.Result, error) {
	select {
	case <-r.done:
		return r.result, r.resultErr
	case <-ctx.Done():
		return subagent.Result{}, fmt.Errorf("inprocess: result of %s: %w", r.ID(), ctx.Err())
	}
}

// Dispose stops listening to Start's context, marks the run cancelled (aborting a turn in
// flight, cause parent), and waits for the result and the child's teardown. It is idempotent;
// it fails only when the teardown failed, or ctx ended before it finished. A result failure
// stays on Result.
func (r *Run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		r.stopListening()
		r.abort()
	})
	select {
	case <-r.done:
		return r.teardownErr
	case <-ctx.Done():
		return fmt.Errorf("inprocess: dispose %s: %w", r.ID(), ctx.Err())
	}
}

// abort marks the run cancelled before cancelling the drive, so the result read after the
// drive sees the mark.
func (r *Run) abort() {
	r.cancelled.Store(true)
	r.cancel()
}

// drive runs the child's turn, reads the result and tears the child down.
func (r *Run) drive(ctx context.Context) {
	defer close(r.done)
	defer r.stopListening()
	if err := r.child.run(ctx, r.req.Prompt); err != nil {
		r.resultErr = err
	} else {
		r.result, r.resultErr = r.read()
	}
	r.teardownErr = r.child.close(context.Background())
}

func (r *Run) read() (subagent.Result, error) {
	id := r.ID()
	hd, events, err := r.host.store.Load(context.Background(), id)
	if err != nil {
		return subagent.Result{}, fmt.Errorf("inprocess: read result of %s: %w", id, err)
	}
	return readResult(id, ownEvents(hd, events), r.req.HasOutputSchema(), r.aborted())
}

// aborted reports whether the run was aborted, by Dispose or by Start's ctx. The ctx is read
// directly: its listener runs r.abort on a goroutine of its own, which a result read right
// after the cancel could otherwise overtake — the same cancel would then give `error` or
// `aborted` depending on scheduling.
func (r *Run) aborted() bool {
	return r.cancelled.Load() || r.startCtx.Err() != nil
}

// afterFunc is context.AfterFunc; tests replace it to delay the listener and show that the
// result does not depend on when it runs.
var afterFunc = context.AfterFunc

// Provider is a subagent.Provider running children on a Host: "spawn" or "fork".
type Provider struct {
	host *Host
	name string
}

// Spawn returns the provider "spawn": a child with a fresh conversation.
func (h *Host) Spawn() *Provider { return &Provider{host: h, name: subagent.ProviderSpawn} }

// Fork returns the provider "fork": a child seeded with the parent's completed turns.
func (h *Host) Fork() *Provider { return &Provider{host: h, name: subagent.ProviderFork} }

// Name returns "spawn" or "fork".
func (p *Provider) Name() string { return p.name }

// Capabilities returns all four capabilities; InheritsParentContext is true for fork only.
func (p *Provider) Capabilities() subagent.Capabilities {
	caps, _ := capabilities(p.name)
	return caps
}

// Start runs Host.Start with this provider.
func (p *Provider) Start(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	r, err := p.host.Start(ctx, req, StartOptions{Provider: p.name})
	if err != nil {
		return nil, err
	}
	return r, nil
}
