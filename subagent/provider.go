package subagent

import (
	"context"
	"sort"
	"sync"
)

// Provider runs delegations.
type Provider interface {
	// Name is the name the provider is registered and requested under.
	Name() string
	// Capabilities says which optional request fields the provider honours.
	Capabilities() Capabilities
	// Start creates and publishes the child and returns the run. It is called only with
	// requests that passed CheckRequest for this provider. A failed Start leaves nothing
	// behind.
	Start(ctx context.Context, req Request) (Run, error)
}

// Run is one published delegation.
type Run interface {
	// ID is the child session id for in-process runs, a fresh UUID for remote ones.
	ID() string
	// Result waits for the run to finish. Child-level failures are reported by the result's
	// stop reason; an error means the result could not be obtained at all.
	Result(ctx context.Context) (Result, error)
	// Dispose stops the run (if still going) and releases it. It is idempotent.
	Dispose(ctx context.Context) error
}

// Registry maps names to providers. The zero value is empty and ready to use; a Registry is
// safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]Provider
}

// Register adds p under p.Name(), replacing any provider of the same name.
func (r *Registry) Register(p Provider) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.providers == nil {
		r.providers = make(map[string]Provider)
	}
	r.providers[p.Name()] = p
}

// Lookup returns the provider registered under name, or a *ValidationError with Rule
// RuleUnknownProvider.
func (r *Registry) Lookup(name string) (Provider, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if p, ok := r.providers[name]; ok {
		return p, nil
	}
	return nil, Rejectf(RuleUnknownProvider, "no subagent provider registered for %q", name)
}

// Names returns the registered provider names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.providers))
	for n := range r.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Check runs the start checks of SPEC R-4 in order: the provider must be registered, then
// CheckRequest against its capabilities. Every failure is a *ValidationError.
func (r *Registry) Check(providerName string, req Request) error {
	p, err := r.Lookup(providerName)
	if err != nil {
		return err
	}
	return CheckRequest(providerName, p.Capabilities(), req)
}

// Start runs the checks of Check and then the provider's Start.
func (r *Registry) Start(ctx context.Context, providerName string, req Request) (Run, error) {
	p, err := r.Lookup(providerName)
	if err != nil {
		return nil, err
	}
	if err := CheckRequest(providerName, p.Capabilities(), req); err != nil {
		return nil, err
	}
	return p.Start(ctx, req)
}
