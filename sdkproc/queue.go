package sdkproc

import (
	"encoding/json"
	"sync"
)

// notification is one notification as read from the child.
type notification struct {
	method string
	params json.RawMessage
}

// queue hands notifications from the connection's read loop, which must never block, to the
// run's own goroutine, in order. It is unbounded while open; once closed it drops.
type queue struct {
	mu     sync.Mutex
	items  []notification
	closed bool
	ready  chan struct{} // has a token while items is non-empty
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

// push is the wire.NotifyFunc of the run's connection.
func (q *queue) push(method string, params json.RawMessage) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.items = append(q.items, notification{method, params})
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take removes and returns everything queued.
func (q *queue) take() []notification {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// close drops everything queued and everything pushed later.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.items = nil
}
