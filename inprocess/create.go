package inprocess

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

// Sources of delegated policy events.
const (
	// SourceDelegation marks the sandbox/mode and approval/policy events a child receives from
	// its parent (contract R-24).
	SourceDelegation = "delegation"
	// SourceDeployment marks a sandbox/mode that is a deployment default rather than an
	// explicit choice; such a mode is never delegated.
	SourceDeployment = "deployment"
)

// CreateRequest asks Create for a child session.
type CreateRequest struct {
	// Provider is subagent.ProviderSpawn or subagent.ProviderFork.
	Provider string
	// ChildID is the child session id; empty means a fresh UUID. A caller that may retry
	// (a Temporal activity) chooses it, so the retry finds the child it created.
	ChildID string
	// Request is the delegation; Request.Parent.SessionID names the parent session.
	Request subagent.Request
	// RuntimeDepth is the parent agent's runtime delegation depth (contract R-5); nil is none.
	RuntimeDepth *float64
	// RunTools are the names of the tools the child's drives install (DriveRequest.Tools),
	// which the request's tool filter may name besides the global tools.
	RunTools []string
	// Owner, when set, is recorded as the child header's Owner: a stored child with another
	// owner is refused (ErrOwnedElsewhere), even as a child of the same parent.
	Owner string
}

// ErrOwnedElsewhere is wrapped by the error of Create when the child exists with another
// owner than CreateRequest.Owner: another run created it.
var ErrOwnedElsewhere = errors.New("the session was created by another run")

// Created is what Create persisted.
type Created struct {
	ChildID string
	Depth   int64
	// Model is the child's resolved model, "" when its route names none.
	Model string
}

// plan is a child ready to be persisted: every check passed, nothing written yet.
type plan struct {
	header session.Header
	setup  []session.Event // seed, end-seed, delegated policy; numbered from 0
}

// Create persists a new child of req.Request.Parent (contract R-20 up to publication): it checks
// the request (the start checks of contract R-4 for the provider, a cancelled ctx, the depth of
// contract R-5, the tool filter, the preset), then writes the header (origin "subagent", depth,
// parent, cwd, route, preset, seedLength for a non-empty fork seed), the seed and its
// end-seed marker, and the delegated policy: the parent's explicit sandbox mode, if any, and
// approval policy "never".
//
// Create is create-if-absent: when the child already exists as a child of the same parent
// (a retried call), it only completes setup events a crash left unwritten, and returns the
// stored depth. A failure or cancel removes what this call created; ctx cancellation gives
// ErrAbortedBeforePublication. Rejections are the *subagent.ValidationError and
// *subagent.DepthError values of package subagent, with their exact messages.
func (h *Host) Create(ctx context.Context, cr CreateRequest) (Created, error) {
	p, existing, err := h.plan(ctx, cr)
	if err != nil {
		return Created{}, err
	}
	if existing != nil {
		return h.complete(ctx, p, *existing)
	}
	if err := h.persist(ctx, p); err != nil {
		return Created{}, err
	}
	return created(p.header), nil
}

func created(hd session.Header) Created {
	c := Created{ChildID: hd.ID, Depth: hd.DelegationDepth}
	if hd.Route != nil {
		c.Model = hd.Route.Model
	}
	return c
}

// capabilities returns the capabilities of the named variant.
func capabilities(provider string) (subagent.Capabilities, error) {
	if provider == subagent.ProviderSpawn || provider == subagent.ProviderFork {
		caps, _ := subagent.ProviderCapabilities(provider)
		return caps, nil
	}
	return subagent.Capabilities{}, fmt.Errorf("inprocess: unknown provider %q (want %q or %q)",
		provider, subagent.ProviderSpawn, subagent.ProviderFork)
}

// plan runs every check and builds the child's header and setup events. When the child
// already exists, plan returns its stored header as existing.
func (h *Host) plan(ctx context.Context, cr CreateRequest) (plan, *session.Header, error) {
	req := cr.Request
	caps, err := capabilities(cr.Provider)
	if err != nil {
		return plan{}, nil, err
	}
	if err := subagent.CheckRequest(cr.Provider, caps, req); err != nil {
		return plan{}, nil, err
	}
	if ctx.Err() != nil {
		return plan{}, nil, subagent.AbortedBeforeStart(ctx, ErrAbortedBeforePublication)
	}
	parentID := req.Parent.SessionID
	if parentID == "" {
		return plan{}, nil, errors.New("inprocess: create: the request names no parent session")
	}
	ph, parentEvents, err := h.store.Load(ctx, parentID)
	if err != nil {
		return plan{}, nil, fmt.Errorf("inprocess: create: load parent: %w", err)
	}
	childID := cr.ChildID
	if childID == "" {
		childID = uuid.NewString()
	}
	hd, err := h.childHeader(cr, childID, ph)
	if err != nil {
		return plan{}, nil, err
	}
	// The delegated policy is read now, from the log as it stands: a later switch in the
	// parent does not reach a child already started.
	sandbox, err := DelegatedSandbox(parentEvents)
	if err != nil {
		return plan{}, nil, fmt.Errorf("inprocess: create: parent %s: %w", parentID, err)
	}
	var seed []session.Event
	if cr.Provider == subagent.ProviderFork {
		seed = session.ForkPrefix(parentEvents)
	}
	hd.SeedLength = int64(len(seed))
	hd.ParentSession = parentID

	stored, _, err := h.store.Load(ctx, childID)
	switch {
	case errors.Is(err, session.ErrNotFound):
	case err != nil:
		return plan{}, nil, fmt.Errorf("inprocess: create %s: %w", childID, err)
	case cr.Owner != "" && stored.Owner != cr.Owner:
		return plan{}, nil, fmt.Errorf("inprocess: create %s: %w (%s)", childID, ErrOwnedElsewhere, stored.Owner)
	case stored.Origin != session.OriginSubagent || stored.ParentSession != parentID:
		return plan{}, nil, fmt.Errorf("inprocess: create %s: a session with this id exists and is not a child of %s",
			childID, parentID)
	default:
		// A retry: the stored header is authoritative, and its seed is the same prefix of the
		// append-only parent log.
		if stored.SeedLength > int64(len(parentEvents)) {
			return plan{}, nil, fmt.Errorf("inprocess: create %s: stored seedLength %d exceeds the parent log",
				childID, stored.SeedLength)
		}
		seed = parentEvents[:stored.SeedLength]
		hd = stored
	}
	setup, err := setupEvents(seed, sandbox)
	if err != nil {
		return plan{}, nil, fmt.Errorf("inprocess: create %s: %w", childID, err)
	}
	p := plan{header: hd, setup: setup}
	if stored.ID != "" {
		return p, &stored, nil
	}
	return p, nil, nil
}

// childHeader checks the depth and the setup of a child of the parent ph and returns its
// header, without its seed length.
func (h *Host) childHeader(cr CreateRequest, childID string, ph session.Header) (session.Header, error) {
	// The parent's subtree cap binds this child and, through its header, every descendant.
	maxDepth := TighterDepth(cr.Request.MaxDepth, ph.MaxDepth)
	depth, err := subagent.ChildDepth(ph.DelegationDepth, cr.RuntimeDepth, maxDepth)
	if err != nil {
		return session.Header{}, err
	}
	hd := session.Header{
		ID:              childID,
		Cwd:             ph.Cwd,
		ParentSession:   ph.ID,
		Origin:          session.OriginSubagent,
		DelegationDepth: depth,
		AgentPreset:     ph.AgentPreset,
		Route:           childRoute(ph.Route, cr.Request.AgentOptions),
		MaxDepth:        maxDepth,
		Owner:           cr.Owner,
	}
	if err := h.checkSetup(hd, cr.Request, cr.RunTools); err != nil {
		return session.Header{}, err
	}
	return hd, nil
}

// CheckNew makes every check Create would make of cr against parent, a session not written
// yet (a root session about to be created for cr): the start checks of the provider, the
// depth, the tool filter, the preset and the schema. A caller that creates the parent only
// when CheckNew passes leaves nothing behind for a request Create would reject. Its errors
// are those of Create.
func (h *Host) CheckNew(cr CreateRequest, parent session.Header) error {
	caps, err := capabilities(cr.Provider)
	if err != nil {
		return err
	}
	if err := subagent.CheckRequest(cr.Provider, caps, cr.Request); err != nil {
		return err
	}
	_, err = h.childHeader(cr, "check-"+parent.ID, parent)
	return err
}

// checkSetup rejects, before anything is written, what setting the child up would reject:
// a model provider the host has no adapter for, an unknown preset, a tool filter naming
// unknown tools, a schema that does not compile.
func (h *Host) checkSetup(hd session.Header, req subagent.Request, runTools []string) error {
	if hd.Route != nil && hd.Route.Provider != "" {
		if _, err := h.models.Lookup(hd.Route.Provider); err != nil {
			return subagent.Rejectf(subagent.RuleUnknownModel, "subagent model provider %q is unknown (agentOptions.provider); known: %s",
				hd.Route.Provider, h.models)
		}
	}
	if _, err := h.preset(hd.AgentPreset); err != nil {
		return fmt.Errorf("inprocess: create %s: %w", hd.ID, err)
	}
	// The error of Restrict is the user-visible message of contract R-25: return it as is.
	if err := restrict(tools.NewScope(h.tools), h.tools, req.ToolFilter, runTools); err != nil {
		return err
	}
	if req.HasOutputSchema() {
		if _, err := subagent.CompileSchema(req.OutputSchema); err != nil {
			return err
		}
	}
	return nil
}

// persist writes a planned child. On failure or cancel it removes the session again.
func (h *Host) persist(ctx context.Context, p plan) (err error) {
	id := p.header.ID
	if err := h.store.Create(ctx, p.header); err != nil {
		return fmt.Errorf("inprocess: create %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			h.rollback(id)
		}
	}()
	if err := h.store.Append(ctx, id, p.setup...); err != nil {
		return fmt.Errorf("inprocess: create %s: %w", id, err)
	}
	if ctx.Err() != nil {
		return subagent.AbortedBeforeStart(ctx, ErrAbortedBeforePublication)
	}
	return nil
}

// complete finishes a child that a previous Create call wrote, appending the setup events
// that call did not get to write.
func (h *Host) complete(ctx context.Context, p plan, stored session.Header) (Created, error) {
	_, events, err := h.store.Load(ctx, stored.ID)
	if err != nil {
		return Created{}, fmt.Errorf("inprocess: create %s: %w", stored.ID, err)
	}
	if n := len(events); n < len(p.setup) {
		if err := h.store.Append(ctx, stored.ID, p.setup[n:]...); err != nil {
			return Created{}, fmt.Errorf("inprocess: create %s: %w", stored.ID, err)
		}
	}
	return created(stored), nil
}

// rollback removes a child session that never got published. It runs detached from the
// caller's context, which may be the very reason for the rollback.
func (h *Host) rollback(id string) {
	if err := h.store.Remove(context.Background(), id); err != nil {
		h.log.Error("inprocess: roll back child session", zap.String("child", id), zap.Error(err))
	}
}

// childRoute is the parent's route overridden field by field by the request (contract R-21);
// nil when no field is set at all.
func childRoute(parent *session.Route, override session.Route) *session.Route {
	var r session.Route
	if parent != nil {
		r = *parent
	}
	r = r.Override(override)
	if r.IsZero() {
		return nil
	}
	return &r
}

// DelegatedSandbox returns the sandbox mode a child of a session with these events inherits
// (contract R-24): the mode of the latest sandbox/mode event that is not a deployment default, or
// "" when there is none. A mode that is not known (tools.CheckSandboxMode) is an error: it
// must not be delegated as if it allowed anything.
func DelegatedSandbox(events []session.Event) (string, error) {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type != session.TypeSandboxMode {
			continue
		}
		var d session.SandboxModeData
		if events[i].Decode(&d) != nil || d.Source == SourceDeployment {
			continue
		}
		if err := tools.CheckSandboxMode(d.Mode); err != nil {
			return "", err
		}
		return d.Mode, nil
	}
	return "", nil
}

// TighterDepth returns the tighter of two depth caps, nil when neither is set.
func TighterDepth(a, b *int64) *int64 {
	switch {
	case a == nil:
		return b
	case b == nil || *a <= *b:
		return a
	}
	return b
}

// setupEvents returns a new child's first events, numbered from 0: the seed and the end-seed
// marker when the seed is not empty, then the delegated policy (contract ).
func setupEvents(seed []session.Event, sandbox string) ([]session.Event, error) {
	var out []session.Event
	if len(seed) > 0 {
		out = session.SeedEvents(seed)
	}
	if sandbox != "" {
		ev, err := session.NewEvent(session.TypeSandboxMode,
			session.SandboxModeData{Mode: sandbox, Source: SourceDelegation})
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	ev, err := session.NewEvent(session.TypeApprovalPolicy,
		session.ApprovalPolicyData{Policy: tools.ApprovalNever, Source: SourceDelegation})
	if err != nil {
		return nil, err
	}
	return session.Renumber(append(out, ev), 0), nil
}
