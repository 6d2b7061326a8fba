// Package session holds what every agent persists: a header and an append-only, densely
// numbered event log, and the Store interface that keeps them. It does no I/O: the stores
// live in filestore (the default, files under a root) and pgstore (PostgreSQL), so code that
// must not do I/O, such as the workflows, may import this package.
//
// The package knows nothing of subagents beyond the header fields they set (origin,
// delegationDepth, seedLength).
package session

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
)

// OriginSubagent is the only origin a header may carry besides none.
const OriginSubagent = "subagent"

// MaxSafeInteger is 2^53−1, the largest integer every JSON reader represents exactly.
const MaxSafeInteger = 1<<53 - 1

// Route says which model adapter answers an agent, with which model, under which output cap.
// MaxTokens 0 means no cap. TokenBudget, when set, caps the tokens (input and output) one
// turn may use: the turn ends max-tokens once its usage reaches it.
type Route struct {
	Provider    string `json:"provider"`
	Model       string `json:"model"`
	MaxTokens   int64  `json:"maxTokens,omitempty"`
	TokenBudget int64  `json:"tokenBudget,omitempty"`
}

// IsZero reports whether no field of the route is set.
func (r Route) IsZero() bool { return r == Route{} }

// Override returns r with every non-zero field of o written over it.
func (r Route) Override(o Route) Route {
	if o.Provider != "" {
		r.Provider = o.Provider
	}
	if o.Model != "" {
		r.Model = o.Model
	}
	if o.MaxTokens != 0 {
		r.MaxTokens = o.MaxTokens
	}
	if o.TokenBudget != 0 {
		r.TokenBudget = o.TokenBudget
	}
	return r
}

// Header describes a session. It is written once, when the session is created.
type Header struct {
	ID              string `json:"id"`
	Cwd             string `json:"cwd"`
	ParentSession   string `json:"parentSession,omitempty"`
	Origin          string `json:"origin,omitempty"`
	DelegationDepth int64  `json:"delegationDepth,omitempty"`
	SeedLength      int64  `json:"seedLength,omitempty"`
	AgentPreset     string `json:"agentPreset,omitempty"`
	Route           *Route `json:"route,omitempty"`
	// MaxDepth is the delegation depth cap of the session's whole subtree, absent when none:
	// no delegation from this session or a descendant creates a child deeper than it. A child
	// inherits its parent's cap, tightened by its own request's maxDepth.
	MaxDepth *int64 `json:"maxDepth,omitempty"`
	// Owner names the run that created the session — a workflow's id and the first run id
	// of its chain, as "<workflowId>/<firstRunId>" — when a workflow's activity created it;
	// absent otherwise. A retry or a reset of that run finds its own session; another run
	// naming the same id is refused before it writes anything (contract R-10).
	Owner string `json:"owner,omitempty"`
}

// Equal reports whether h and o are the same header, comparing by value: a nil Route equals a
// zero one. Stores use it to make Create idempotent.
func (h Header) Equal(o Header) bool {
	routeOf := func(h *Header) Route {
		r := h.Route
		h.Route = nil
		if r == nil {
			return Route{}
		}
		return *r
	}
	capOf := func(h *Header) (int64, bool) {
		c := h.MaxDepth
		h.MaxDepth = nil
		if c == nil {
			return 0, false
		}
		return *c, true
	}
	hc, hok := capOf(&h)
	oc, ook := capOf(&o)
	return hc == oc && hok == ook && routeOf(&h) == routeOf(&o) && h == o
}

// ErrInvalidHeader is wrapped by every error Header.Validate returns.
var ErrInvalidHeader = errors.New("invalid session header")

// Validate checks the rules of contract R-10: an id, an absolute cwd, origin empty or "subagent",
// and non-negative safe integers.
func (h Header) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidHeader, fmt.Sprintf(format, a...))
	}
	switch {
	case h.ID == "":
		return bad("id is empty")
	case !filepath.IsAbs(h.Cwd):
		return bad("cwd must be an absolute path: %q", h.Cwd)
	case h.Origin != "" && h.Origin != OriginSubagent:
		return bad("origin must be %q or absent: %q", OriginSubagent, h.Origin)
	case h.DelegationDepth < 0 || h.DelegationDepth > MaxSafeInteger:
		return bad("delegationDepth must be a non-negative safe integer: %d", h.DelegationDepth)
	case h.SeedLength < 0 || h.SeedLength > MaxSafeInteger:
		return bad("seedLength must be a non-negative safe integer: %d", h.SeedLength)
	}
	if h.MaxDepth != nil && (*h.MaxDepth < 0 || *h.MaxDepth > MaxSafeInteger) {
		return bad("maxDepth must be a non-negative safe integer: %d", *h.MaxDepth)
	}
	if h.Route != nil && (h.Route.MaxTokens < 0 || h.Route.MaxTokens > MaxSafeInteger) {
		return bad("route maxTokens must be a non-negative safe integer: %d", h.Route.MaxTokens)
	}
	if h.Route != nil && (h.Route.TokenBudget < 0 || h.Route.TokenBudget > MaxSafeInteger) {
		return bad("route tokenBudget must be a non-negative safe integer: %d", h.Route.TokenBudget)
	}
	return nil
}

// IsSafeInteger reports whether f is an integer in [0, 2^53−1].
func IsSafeInteger(f float64) bool {
	return f >= 0 && f <= MaxSafeInteger && f == math.Trunc(f)
}
