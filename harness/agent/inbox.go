package agent

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/subflow-dev/subflow/harness/session"
)

// SourceFollowup is the source of user messages queued with Followup.
const SourceFollowup = "followup"

// abortError is the cancellation cause of an aborted turn; cause is a session.Cause* value.
type abortError struct{ cause string }

func (e *abortError) Error() string { return "agent: turn aborted (" + e.cause + ")" }

func abortCause(cause string) error { return &abortError{cause: cause} }

// Followup queues a user message and returns its id at once; the loop splices it into the
// conversation (`agent/inbox/spliced`) when it starts the next turn. Messages queued while a
// turn runs are spliced together into the following turn. On a Pending session the unfinished
// turn is resumed first.
func (a *Agent) Followup(ctx context.Context, content []session.Block) (messageID string, err error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("agent: followup to %s: %w", a.header.ID, err)
	}
	id := uuid.NewString()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return "", fmt.Errorf("agent: followup to %s: %w", a.header.ID, ErrClosed)
	}
	a.queue = append(a.queue, session.UserMessage{
		ID: id, Role: "user", Content: content, Source: SourceFollowup,
	})
	a.traceParentLocked(ctx)
	a.busyLocked()
	return id, nil
}

// Resume asks the loop to continue the unfinished turn the log ends in (see Pending) and
// returns at once; WhenIdle waits for it. Tool calls whose tool/result is stored are not run
// again. A torn step (step/start without assistant/message) is redone as a new step with the
// next step number; its chunks stay in the log. It fails with ErrNotPending when there is
// nothing to resume.
func (a *Agent) Resume(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("agent: resume %s: %w", a.header.ID, err)
	}
	pending := a.logPending()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return fmt.Errorf("agent: resume %s: %w", a.header.ID, ErrClosed)
	}
	if !pending || a.running {
		return fmt.Errorf("agent: resume %s: %w", a.header.ID, ErrNotPending)
	}
	a.resumeAsked = true
	a.traceParentLocked(ctx)
	a.busyLocked()
	return nil
}

// Cancel aborts the running turn: it ends `aborted` with cause (session.CauseUser,
// CauseParent or CauseDisposed), and a tool call in flight sees its context cancelled. When no
// turn runs yet but work is queued, the turn that work starts is aborted at once, so a Cancel
// right after Followup is never lost. With nothing running or queued Cancel does nothing.
func (a *Agent) Cancel(cause string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.running:
		a.cancelTurn(abortCause(cause))
	case len(a.queue) > 0 || a.resumeAsked:
		a.cancelNext = cause
	}
}

// WhenIdle returns when no turn is running and nothing is queued, or when the agent is closed.
func (a *Agent) WhenIdle(ctx context.Context) error {
	a.mu.Lock()
	idle := a.idle
	a.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("agent: wait for %s to be idle: %w", a.header.ID, ctx.Err())
	}
}

// traceParentLocked makes the span of ctx, when it has one, the parent of the spans of the
// turns the loop runs next (model requests and tool calls, docs/tracing.md): the loop runs
// turns in a context of its own. The caller holds mu.
func (a *Agent) traceParentLocked(ctx context.Context) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		a.turnParent = sc
	}
}

// busyLocked marks work as queued and wakes the loop. The caller holds mu.
func (a *Agent) busyLocked() {
	a.interrupted, a.endFailure = nil, nil
	select {
	case <-a.idle:
		a.idle = make(chan struct{})
	default:
	}
	a.signal()
}

// idleLocked marks the agent idle. The caller holds mu.
func (a *Agent) idleLocked() {
	select {
	case <-a.idle:
	default:
		close(a.idle)
	}
}

// signal wakes the loop without blocking.
func (a *Agent) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// work is what the loop runs next: a resumption or a turn for the queued messages.
type work struct {
	resume bool
	msgs   []session.UserMessage
}

// logPending reports whether the log ends inside a turn. It takes logMu alone: mu is never
// held while waiting for logMu, because subscribers (running under logMu) may call Cancel.
func (a *Agent) logPending() bool {
	a.logMu.Lock()
	defer a.logMu.Unlock()
	return a.st.pending != nil
}

// takeWorkLocked picks the next work, resumption first; pending is logPending, read by the
// loop, the only goroutine that runs turns. The caller holds mu.
func (a *Agent) takeWorkLocked(pending bool) (work, bool) {
	if pending && (a.resumeAsked || len(a.queue) > 0) {
		a.resumeAsked = false
		return work{resume: true}, true
	}
	a.resumeAsked = false
	if len(a.queue) == 0 {
		return work{}, false
	}
	msgs := a.queue
	a.queue = nil
	return work{msgs: msgs}, true
}

// loop runs queued work until Close.
func (a *Agent) loop() {
	defer close(a.done)
	for range a.wake {
		for {
			pending := a.logPending()
			a.mu.Lock()
			if a.closed {
				a.queue = nil
				a.resumeAsked = false
				a.idleLocked()
				a.mu.Unlock()
				return
			}
			w, ok := a.takeWorkLocked(pending)
			if !ok {
				a.cancelNext = ""
				a.idleLocked()
				a.mu.Unlock()
				break
			}
			ctx, cancel := context.WithCancelCause(trace.ContextWithSpanContext(context.Background(), a.turnParent))
			if a.cancelNext != "" {
				cancel(abortCause(a.cancelNext))
				a.cancelNext = ""
			}
			a.running = true
			a.cancelTurn = cancel
			a.mu.Unlock()

			if w.resume {
				a.resumeTurn(ctx)
			} else {
				a.newTurn(ctx, w.msgs)
			}
			cancel(nil)

			a.mu.Lock()
			a.running = false
			a.cancelTurn = nil
			a.mu.Unlock()
		}
	}
}
