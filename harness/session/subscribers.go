package session

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Subscribers is the in-process subscriber list a Store keeps per session. A store calls
// Publish after each successful append, while it still serializes appends to that session, so
// subscribers see batches in seq order. The zero value is ready to use and safe for concurrent
// use.
type Subscribers struct {
	mu   sync.Mutex
	subs map[string][]*subscription // replaced, never modified in place: Publish reads a snapshot
}

type subscription struct {
	fn     func(Event)
	active atomic.Bool
}

// Subscribe adds fn for the session's events (see Store.Subscribe). fn may call the returned
// unsubscribe itself and then gets no further event; once unsubscribe has returned, no Publish
// that starts later calls fn.
func (s *Subscribers) Subscribe(id string, fn func(Event)) (unsubscribe func()) {
	sub := &subscription{fn: fn}
	sub.active.Store(true)
	s.mu.Lock()
	if s.subs == nil {
		s.subs = make(map[string][]*subscription)
	}
	s.subs[id] = append(slices.Clip(s.subs[id]), sub)
	s.mu.Unlock()
	return func() {
		if !sub.active.Swap(false) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		rest := slices.DeleteFunc(slices.Clone(s.subs[id]), func(other *subscription) bool { return other == sub })
		if len(rest) == 0 {
			delete(s.subs, id)
		} else {
			s.subs[id] = rest
		}
	}
}

// Publish calls the session's subscribers with events, in order, from the calling goroutine.
func (s *Subscribers) Publish(id string, events []Event) {
	s.mu.Lock()
	subs := s.subs[id]
	s.mu.Unlock()
	for _, e := range events {
		for _, sub := range subs {
			if sub.active.Load() {
				sub.fn(e)
			}
		}
	}
}
