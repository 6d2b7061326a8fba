package childruntime

import (
	"encoding/json"
	"sync"

	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/internal/wire"
)

// note is one notification waiting to be written.
type note struct {
	method string
	params any
}

// eventParams are the params of session.event (wire.SessionEventParams with a typed event).
type eventParams struct {
	SessionID string        `json:"sessionId"`
	Event     session.Event `json:"event"`
}

// outbox writes notifications in the order they were pushed, from its own goroutine: agents
// deliver events while holding their log, so pushing must never wait for a slow client.
type outbox struct {
	enc *wire.Encoder
	log *zap.Logger

	mu     sync.Mutex
	queue  []note
	closed bool
	failed bool // a write failed: the client is gone, later notes are dropped
	wake   chan struct{}
	done   chan struct{}
}

func newOutbox(enc *wire.Encoder, log *zap.Logger) *outbox {
	return &outbox{enc: enc, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues a notification; after close it is dropped.
func (o *outbox) push(method string, params any) {
	o.mu.Lock()
	if !o.closed {
		o.queue = append(o.queue, note{method: method, params: params})
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// close stops taking notifications and returns once every queued one was written.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	<-o.done
}

// run writes queued notifications until close.
func (o *outbox) run() {
	defer close(o.done)
	for range o.wake {
		o.mu.Lock()
		batch, closed := o.queue, o.closed
		o.queue = nil
		o.mu.Unlock()
		for _, n := range batch {
			o.write(n)
		}
		if closed {
			// Anything pushed before close was taken with the batch: push drops after close.
			return
		}
	}
}

func (o *outbox) write(n note) {
	if o.failed {
		return
	}
	raw, err := json.Marshal(n.params)
	if err != nil {
		o.log.Error("server: encode notification", zap.String("method", n.method), zap.Error(err))
		return
	}
	if err := o.enc.Encode(&wire.Message{Method: n.method, Params: raw}); err != nil {
		o.failed = true
		o.log.Warn("server: write notification failed; dropping the rest", zap.String("method", n.method), zap.Error(err))
	}
}

// sessionState is an open session: its agent and its running/idle status.
//
// The status is derived from the log so that it is ordered with the events: `running` is
// pushed when a prompt finds the session idle (before its receipt can exist), `idle` right
// after a turn/end when no prompt is waiting to be spliced. queued counts prompts given to the
// agent and not yet seen in an agent/inbox/spliced event, so a turn/end that a queued prompt
// will follow (a resumed turn, or the turn running when the prompt came) is not taken for the
// end of the work.
type sessionState struct {
	id    string
	agent *agent.Agent
	out   *outbox
	log   *zap.Logger

	mu      sync.Mutex
	queued  int
	running bool
}

// newSessionState subscribes to a's events; a must not have appended anything since Open.
func newSessionState(id string, a *agent.Agent, out *outbox, log *zap.Logger) *sessionState {
	st := &sessionState{id: id, agent: a, out: out, log: log}
	a.Subscribe(st.onEvent)
	return st
}

// queue records a prompt about to be given to the agent, reporting `running` if the session
// was idle.
func (st *sessionState) queue() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.queued++
	if !st.running {
		st.running = true
		st.out.push(wire.NotifySessionStatus, wire.SessionStatusParams{SessionID: st.id, Status: wire.StatusRunning})
	}
}

// unqueue takes back a prompt the agent refused. Followup refuses only a closed agent or a
// done context, which happen only at dispose, so the status is left to the disposal.
func (st *sessionState) unqueue() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.queued--
}

// onEvent runs on the agent's appending goroutine while its log is held: it only queues.
func (st *sessionState) onEvent(ev session.Event) {
	st.out.push(wire.NotifySessionEvent, eventParams{SessionID: st.id, Event: ev})
	switch ev.Type {
	case session.TypeInboxSpliced:
		var d session.InboxSplicedData
		if err := ev.Decode(&d); err != nil {
			st.log.Error("server: decode receipt", zap.String("session", st.id), zap.Error(err))
			return
		}
		st.mu.Lock()
		st.queued = max(0, st.queued-len(d.Inserted))
		st.mu.Unlock()
	case session.TypeTurnEnd:
		st.mu.Lock()
		st.idleLocked()
		st.mu.Unlock()
	}
}

// idleLocked reports `idle` once when the session was running and nothing is queued.
func (st *sessionState) idleLocked() {
	if st.running && st.queued == 0 {
		st.running = false
		st.out.push(wire.NotifySessionStatus, wire.SessionStatusParams{SessionID: st.id, Status: wire.StatusIdle})
	}
}
