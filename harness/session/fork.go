package session

import (
	"slices"
	"time"
)

// ForkPrefix returns what a fork seeds its child with (contract R-22): the parent's events from
// seq 0 through its last turn/end, leaving out a turn still in flight. A log with no completed
// turn gives nil. The result is a new slice; events is not modified.
func ForkPrefix(events []Event) []Event {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == TypeTurnEnd {
			return slices.Clone(events[:i+1])
		}
	}
	return nil
}

// Renumber returns a copy of events numbered densely from first, as Append expects of events
// copied from another log.
func Renumber(events []Event, first int64) []Event {
	out := slices.Clone(events)
	for i := range out {
		out[i].Seq = first + int64(i)
	}
	return out
}

// SeedEvents returns the first events of a child session seeded with seed (contract R-22): seed
// renumbered from 0, then the session/end-seed marker at seq len(seed). The child's header
// records SeedLength = len(seed). An empty seed gives the marker alone, at seq 0.
func SeedEvents(seed []Event) []Event {
	out := Renumber(seed, 0)
	return append(out, Event{
		Type: TypeEndSeed,
		Seq:  int64(len(seed)),
		Time: time.Now().UTC(),
		Data: []byte("{}"),
	})
}
