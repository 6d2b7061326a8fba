package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
)

// Append appends one event of type typ with data as its payload, for setup before the first
// turn (delegated sandbox/approval policy, markers) or a policy switch between turns. Sandbox
// mode and approval policy events take effect for the tool calls that follow. A sandbox mode
// that is not known (tools.CheckSandboxMode) is rejected.
func (a *Agent) Append(ctx context.Context, typ string, data any) (session.Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return session.Event{}, fmt.Errorf("agent: append %s to %s: %w", typ, a.header.ID, err)
	}
	if typ == session.TypeSandboxMode {
		var d session.SandboxModeData
		if err := json.Unmarshal(raw, &d); err != nil {
			return session.Event{}, fmt.Errorf("agent: append %s to %s: %w", typ, a.header.ID, err)
		}
		if err := tools.CheckSandboxMode(d.Mode); err != nil {
			return session.Event{}, fmt.Errorf("agent: append %s to %s: %w", typ, a.header.ID, err)
		}
	}
	a.logMu.Lock()
	defer a.logMu.Unlock()
	ev := session.Event{Type: typ, Time: time.Now().UTC(), Data: raw}
	if err := a.appendLocked(ctx, &ev); err != nil {
		return session.Event{}, err
	}
	if err := a.st.replayOne(&ev); err != nil {
		return ev, fmt.Errorf("agent: append %s to %s: %w", typ, a.header.ID, err)
	}
	return ev, nil
}

// Subscribe calls fn with every event this agent appends from now on, live and in seq order
// (text deltas included, as they stream). fn runs on the appending goroutine while the log is
// held: it must not block and must not call back into the agent, except Cancel. The returned function
// unsubscribes; it may be called more than once.
func (a *Agent) Subscribe(fn func(session.Event)) (unsubscribe func()) {
	a.logMu.Lock()
	defer a.logMu.Unlock()
	id := a.nextSub
	a.nextSub++
	a.subs[id] = fn
	return func() {
		a.logMu.Lock()
		defer a.logMu.Unlock()
		delete(a.subs, id)
	}
}

// emit appends an event built from typ and data and lets apply (if any) update the state under
// the same lock, so state, log and subscribers never disagree.
func (a *Agent) emit(typ string, data any, apply func(*state)) error {
	a.logMu.Lock()
	defer a.logMu.Unlock()
	if err := a.emitLocked(typ, data); err != nil {
		return err
	}
	if apply != nil {
		apply(a.st)
	}
	return nil
}

// emitLocked appends an event built from typ and data. The caller holds logMu.
func (a *Agent) emitLocked(typ string, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("agent: append %s to %s: %w", typ, a.header.ID, err)
	}
	ev := session.Event{Type: typ, Time: time.Now().UTC(), Data: raw}
	return a.appendLocked(storeCtx, &ev)
}

// emitRaw appends caller-built events (hook events) in order, keeping their type and data.
func (a *Agent) emitRaw(events []session.Event) error {
	a.logMu.Lock()
	defer a.logMu.Unlock()
	for i := range events {
		ev := events[i]
		if ev.Time.IsZero() {
			ev.Time = time.Now().UTC()
		}
		if err := a.appendLocked(storeCtx, &ev); err != nil {
			return err
		}
		if err := a.st.replayOne(&ev); err != nil {
			return fmt.Errorf("agent: append %s to %s: %w", ev.Type, a.header.ID, err)
		}
	}
	return nil
}

// appendLocked gives ev the next seq, writes it and delivers it. The caller holds logMu.
func (a *Agent) appendLocked(ctx context.Context, ev *session.Event) error {
	if a.suspended {
		return fmt.Errorf("agent: append %s to %s: %w", ev.Type, a.header.ID, ErrSuspended)
	}
	ev.Seq = a.st.nextSeq
	if err := a.store.Append(ctx, a.header.ID, *ev); err != nil {
		return &StoreError{SessionID: a.header.ID, Op: "append " + ev.Type, Err: err}
	}
	a.st.nextSeq++
	for _, fn := range a.subs {
		fn(*ev)
	}
	return nil
}

// sync makes the log durable; the loop calls it at every step/end and turn/end.
func (a *Agent) sync() error {
	if err := a.store.Sync(storeCtx, a.header.ID); err != nil {
		return &StoreError{SessionID: a.header.ID, Op: "sync", Err: err}
	}
	return nil
}

// StoreError is a write of the session log that the store failed: an append or a sync.
type StoreError struct {
	SessionID string
	Op        string // "append <event type>" or "sync"
	Err       error  // the store's error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("agent: %s to session %s: %v", e.Op, e.SessionID, e.Err)
}

func (e *StoreError) Unwrap() error { return e.Err }
