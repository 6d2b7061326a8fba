package agent

import (
	"context"
	"errors"
	"fmt"
)

// ErrSuspended is wrapped by every log write refused because the agent was suspended.
var ErrSuspended = errors.New("agent: suspended")

// Suspend stops the agent without ending its turn, for a process that hands the session over
// to another one (a worker shutting down): from the call on the agent appends nothing more, the
// running turn's model request and tool call in flight see their context cancelled, no
// turn/end is written, queued messages that no turn took are dropped, and the loop stops. Then
// the log is synced, so what the agent wrote is durable. The session is left Pending: the next
// agent opened on it resumes the turn (see Resume), redoing only what was not stored — a tool
// call interrupted in flight has no tool/result and runs again.
//
// After Suspend the agent is closed (Close returns at once). Suspend is idempotent; it fails
// when ctx ends before the loop stopped or when the sync fails. It must not be called from a
// subscriber.
func (a *Agent) Suspend(ctx context.Context) error {
	a.logMu.Lock()
	a.suspended = true
	a.logMu.Unlock()

	a.mu.Lock()
	if !a.closed {
		a.closed = true
		if a.cancelTurn != nil {
			a.cancelTurn(ErrSuspended)
		}
		a.signal()
	}
	a.mu.Unlock()
	select {
	case <-a.done:
	case <-ctx.Done():
		return fmt.Errorf("agent: suspend %s: %w", a.header.ID, ctx.Err())
	}
	if err := a.store.Sync(ctx, a.header.ID); err != nil {
		return fmt.Errorf("agent: suspend %s: %w", a.header.ID, err)
	}
	return nil
}
