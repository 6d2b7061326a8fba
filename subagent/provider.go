package subagent

import "context"

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
