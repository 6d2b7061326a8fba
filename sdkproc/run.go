package sdkproc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/internal/wire"
	"github.com/subflow-dev/subflow/subagent"
)

// Run is one published SDK child (a subagent.Run). Its methods are safe for concurrent use.
//
// The prompt is sent by the first Result call. The caller owns the child process and must
// call Dispose exactly when it no longer needs the run — also after a completed Result and
// after a Result cancelled through its context.
type Run struct {
	p      *Provider
	log    *zap.Logger // carries the provider and run fields
	id     string
	prompt []session.Block
	child  *child
	events *queue

	startOnce sync.Once     // starts the drive, or settles a run disposed before any Result
	abortOnce sync.Once     // closes abort
	abort     chan struct{} // asks the drive to settle aborted
	done      chan struct{} // closed once result is settled

	mu       sync.Mutex
	settled  bool
	result   subagent.Result
	progress Progress

	disposeOnce sync.Once
	disposeErr  error

	permits *permits // nil without RunOptions.Admit
	usage   session.Usage
	digest  *subagent.DigestBuilder // guarded by mu
	// reported are the run's events as the runtime reported them, from the prompt's
	// receipt on, streamed chunks left out (the assistant message repeats them); guarded by
	// mu.
	reported []session.Event
}

var _ subagent.Run = (*Run)(nil)

func newRun(p *Provider, id string, prompt []session.Block, log *zap.Logger) *Run {
	return &Run{
		p:        p,
		log:      log,
		id:       id,
		prompt:   prompt,
		events:   newQueue(),
		abort:    make(chan struct{}),
		done:     make(chan struct{}),
		progress: Progress{Phase: PhasePublished},
	}
}

// ID returns the run id, which is also the child session id inside the runtime.
func (r *Run) ID() string { return r.id }

// PID returns the child's process id (also its process group id).
func (r *Run) PID() int { return r.child.pid }

// ExitState returns how the child process ended, or nil while it has not been reaped.
func (r *Run) ExitState() *os.ProcessState {
	select {
	case <-r.child.exited:
		return r.child.state
	default:
		return nil
	}
}

// Result sends the prompt (on the first call) and waits for the run to settle, following the
// owned-run algorithm of contract R-65; the stop reason is that of R-54. It is memoized: every
// call returns the same result, and the error is always nil — transport and protocol
// failures after publish settle the run as `error` (with partial output kept) and log one
// warning. When ctx ends first, the run settles `aborted` with the output streamed so far;
// the child keeps running until Dispose.
func (r *Run) Result(ctx context.Context) (subagent.Result, error) {
	r.startOnce.Do(func() { go r.drive() })
	select {
	case <-r.done:
	case <-ctx.Done():
		r.requestAbort()
		<-r.done
	}
	return r.settledResult(), nil
}

// Dispose settles the run `aborted` if it has not settled (keeping partial output; the
// protocol has no cancel), then stops the child with the ladder of contract R-55 and reaps it.
// It is idempotent: later calls wait for the first and return its error, which is non-nil
// only when the child survived SIGKILL. A done ctx cuts the graceful steps short and goes
// straight to SIGKILL; the child is still reaped before Dispose returns.
func (r *Run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		r.startOnce.Do(func() { r.settle(subagent.StopAborted, []session.Block{}) })
		r.requestAbort()
		<-r.done
		r.disposeErr = r.child.stop(ctx, ladderOptions{
			shutdown:        true,
			shutdownTimeout: r.p.cfg.shutdownTimeout,
			eofGrace:        r.p.cfg.eofGrace,
			grace:           r.p.cfg.grace,
		})
		r.releasePermits()
	})
	return r.disposeErr
}

// releasePermits releases the admission permits the child still holds.
func (r *Run) releasePermits() {
	if r.permits != nil {
		r.permits.releaseAll()
	}
}

// Usage returns the tokens the run's model requests used so far, summed over the assistant
// messages of the run's own turn (those after the prompt's receipt), as in-process runs
// report theirs.
func (r *Run) Usage() session.Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.usage
}

// Digest returns the digest of the run's turn so far with its stop reason once settled
// (subagent.Digest), built from the events the runtime reported; nil when
// RunOptions.Digest's level is off.
func (r *Run) Digest() *subagent.Digest {
	r.mu.Lock()
	defer r.mu.Unlock()
	stop := subagent.StopReason("")
	if r.settled {
		stop = r.result.StopReason
	}
	return r.digest.Digest(stop)
}

// Events returns the events the runtime reported of the run's session, from the prompt's
// receipt on, without the streamed chunks: its transcript (subagent.BuildTranscript).
func (r *Run) Events() []session.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]session.Event(nil), r.reported...)
}

// Progress returns a snapshot of the run's progress, for heartbeats.
func (r *Run) Progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress
}

// Phases of Progress.
const (
	PhasePublished = "published" // handshake done, prompt not sent
	PhasePrompted  = "prompted"  // prompt sent, receipt not seen
	PhaseRunning   = "running"   // receipt seen, collecting
	PhaseSettled   = "settled"   // result settled
)

// Progress is what a run has done so far: subagent.Progress, the one progress type. Steps
// counts the step/start events of the run.
type Progress = subagent.Progress

func (r *Run) requestAbort() { r.abortOnce.Do(func() { close(r.abort) }) }

func (r *Run) settledResult() subagent.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.result
}

// settle records the result unless one already was.
func (r *Run) settle(stop subagent.StopReason, output []session.Block) {
	r.settleWith(stop, output, "")
}

// fail settles the run as `error` after a post-publish failure, with the one warning of
// contract R-54.
func (r *Run) fail(output []session.Block, message string) {
	r.settleWith(subagent.StopError, output, message)
}

// settleWith records the result unless one already was. A non-empty failure is logged as
// the run's warning before anyone waiting on the result is released.
func (r *Run) settleWith(stop subagent.StopReason, output []session.Block, failure string) {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return
	}
	r.settled = true
	r.result = subagent.Result{Output: output, StopReason: stop}
	r.progress.Phase = PhaseSettled
	r.mu.Unlock()
	r.events.close()
	if failure != "" {
		r.log.Warn(fmt.Sprintf("%s %q: child run failed (%s): %s", messagePrefix, r.p.Name(), stop, failure))
	}
	close(r.done)
}

// drive is the owned-run algorithm of contract R-65. It runs once, in its own goroutine, and
// returns when the result is settled.
func (r *Run) drive() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The subscription exists since spawn (the queue is the Conn's notify function), so a
	// receipt that precedes the prompt's response waits in the queue.
	type outcome struct {
		raw json.RawMessage
		err error
	}
	prompted := make(chan outcome, 1)
	go func() {
		var raw json.RawMessage
		err := r.child.conn.Call(ctx, wire.MethodSessionPrompt,
			wire.PromptParams{SessionID: r.id, ContentBlocks: r.prompt}, &raw)
		prompted <- outcome{raw, err}
	}()
	r.setPhase(PhasePrompted)

	s := &collectState{run: r}
	inputDone := r.child.conn.Done()
	inputEnded := false
	for {
		select {
		case <-r.abort:
			r.settle(subagent.StopAborted, s.c.Output())
			return
		case o := <-prompted:
			prompted = nil
			if o.err != nil {
				r.fail(s.c.Output(), o.err.Error())
				return
			}
			var res struct {
				MessageID *string `json:"messageId"`
			}
			if json.Unmarshal(o.raw, &res) != nil || res.MessageID == nil {
				r.fail(s.c.Output(), "session/prompt returned no message id: "+compact(o.raw))
				return
			}
			s.messageID = *res.MessageID
		case <-r.events.ready:
		case <-inputDone:
			inputDone, inputEnded = nil, true
		}
		if prompted != nil {
			continue // the receipt cannot be recognised before the message id is known
		}
		for _, n := range r.events.take() {
			if s.handle(n) {
				return
			}
		}
		if inputEnded {
			// Everything the child wrote before its output ended has been handled.
			r.fail(s.c.Output(), r.child.conn.Err().Error())
			return
		}
	}
}

func (r *Run) setPhase(phase string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.settled {
		r.progress.Phase = phase
	}
}

// collectState is the drive's view of the child's root session.
type collectState struct {
	run       *Run
	messageID string
	receipt   bool // the prompt's agent/inbox/spliced was seen
	c         subagent.Collector
}

// handle takes one notification into account and reports whether the run has settled.
func (s *collectState) handle(n notification) bool {
	r := s.run
	switch n.method {
	case wire.NotifySessionEvent:
		var p wire.SessionEventParams
		if json.Unmarshal(n.params, &p) != nil || p.SessionID != r.id {
			return false // another session of the runtime, or not ours to judge
		}
		if err := s.event(p.Event); err != nil {
			r.fail(s.c.Output(), err.Error())
			return true
		}
	case wire.NotifySessionStatus:
		var p wire.SessionStatusParams
		if json.Unmarshal(n.params, &p) != nil || p.SessionID != r.id {
			return false
		}
		// An idle before the receipt is the session's state before our prompt's turn.
		if p.Status == wire.StatusIdle && s.receipt {
			r.settle(subagent.SDKStopReason(s.c.LastTurnEnd()), s.c.Output())
			return true
		}
	}
	return false
}

// event validates and collects one event of the root session.
func (s *collectState) event(raw json.RawMessage) error {
	var env map[string]json.RawMessage
	if err := json.Unmarshal(raw, &env); err != nil || env == nil {
		return fmt.Errorf("protocol error: session.event is not an object: %s", snippet(raw))
	}
	var typ string
	if t, ok := env["type"]; !ok || json.Unmarshal(t, &typ) != nil {
		return fmt.Errorf("protocol error: session.event has no string type: %s", snippet(raw))
	}
	ev := session.Event{Type: typ, Data: env["data"], Time: time.Now().UTC()}
	if t, ok := env["time"]; ok {
		// The runtime's own clock times the steps and tools of the digest when it says.
		var at time.Time
		if json.Unmarshal(t, &at) == nil && !at.IsZero() {
			ev.Time = at
		}
	}
	if !s.receipt {
		if typ == session.TypeInboxSpliced {
			var d session.InboxSplicedData
			if err := ev.Decode(&d); err != nil {
				return fmt.Errorf("protocol error: %w", err)
			}
			for _, m := range d.Inserted {
				if m.ID == s.messageID {
					s.receipt = true
					s.run.setPhase(PhaseRunning)
					s.run.mu.Lock()
					s.run.reported = append(s.run.reported, ev)
					s.run.mu.Unlock()
				}
			}
		}
		return nil // before the receipt nothing is attributed to the run
	}
	if typ == session.TypeAssistantMessage {
		if err := checkAssistantMessage(ev.Data); err != nil {
			return err
		}
	}
	if err := s.c.Add(ev); err != nil {
		return fmt.Errorf("protocol error: %w", err)
	}
	s.track(ev)
	return nil
}

// checkAssistantMessage enforces the envelope rule of contract R-65: the message content is an
// array of objects, each with a string type.
func checkAssistantMessage(data json.RawMessage) error {
	var d struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	bad := fmt.Errorf("protocol error: assistant/message content must be an array of objects with a string type: %s", snippet(data))
	if json.Unmarshal(data, &d) != nil {
		return bad
	}
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(d.Message.Content, &blocks) != nil || blocks == nil {
		return bad
	}
	for _, b := range blocks {
		var typ string
		if b == nil || json.Unmarshal(b["type"], &typ) != nil {
			return bad
		}
	}
	return nil
}

// track updates Progress from an event the collector accepted.
func (s *collectState) track(ev session.Event) {
	r := s.run
	r.mu.Lock()
	r.digest.Add(ev)
	if ev.Type != session.TypeAssistantChunk {
		r.reported = append(r.reported, ev)
	}
	if r.digest.Level() != subagent.DigestOff {
		r.progress.LastTool = r.digest.LastTool()
	}
	r.mu.Unlock()
	switch ev.Type {
	case session.TypeStepStart:
		r.mu.Lock()
		r.progress.Steps++
		r.mu.Unlock()
	case session.TypeAssistantChunk:
		var d session.AssistantChunkData
		if ev.Decode(&d) == nil && d.Chunk.Type == session.ChunkTextDelta {
			r.mu.Lock()
			r.progress.StreamedBytes += int64(len(d.Chunk.Text))
			r.progress.Tail = subagent.Tail(r.progress.Tail + d.Chunk.Text)
			r.mu.Unlock()
		}
	case session.TypeAssistantMessage:
		var d session.AssistantMessageData
		if ev.Decode(&d) == nil {
			r.mu.Lock()
			if d.Usage != nil {
				r.progress.OutputTokens += d.Usage.OutputTokens
				r.usage.InputTokens += d.Usage.InputTokens
				r.usage.OutputTokens += d.Usage.OutputTokens
			}
			if text := session.JoinText(d.Message.Content); text != "" {
				r.progress.Tail = subagent.Tail(text)
			}
			r.mu.Unlock()
		}
	}
}

// snippet shortens raw JSON for a message.
func snippet(raw json.RawMessage) string {
	const max = 200
	s := compact(raw)
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}
