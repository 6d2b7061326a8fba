// Package storetest is the contract suite every session.Store runs: the behaviour the Store
// and Leaser doc comments promise, checked the same way for the file store and for Postgres.
//
// A store's own tests add what only it can show (torn lines of a file, a crashed process
// holding a lease); this suite needs nothing but the Store.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

// Run runs the contract suite as subtests of t.
//
// newStore returns a new Store instance over the backing data of the test it is given: every
// call with the same t must see the same sessions, as two processes sharing a root directory
// or a database do (the suite opens two instances to stand for two processes). The suite uses
// session ids unique to each run and removes its sessions, so the backing data may be shared
// between tests and runs. newStore closes what it opens, in t.Cleanup. Stores that implement
// session.Leaser get the lease tests too; stores that do not skip them.
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	prefix := fmt.Sprintf("storetest-%08x", rand.Uint32())
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c *suite)
	}{
		{"CreateIfAbsent", testCreateIfAbsent},
		{"CreateRejectsInvalidHeader", testCreateRejectsInvalidHeader},
		{"InvalidIDs", testInvalidIDs},
		{"AppendLoadRoundTrip", testAppendLoadRoundTrip},
		{"SeqConflictWritesNothing", testSeqConflictWritesNothing},
		{"AppendRejectsUnencodableData", testAppendRejectsUnencodableData},
		{"MissingSession", testMissingSession},
		{"Subscribe", testSubscribe},
		{"SubscribersSeeSeqOrder", testSubscribersSeeSeqOrder},
		{"Remove", testRemove},
		{"TwoStoresContinueOneLog", testTwoStoresContinueOneLog},
		{"TwoStoresCannotInterleave", testTwoStoresCannotInterleave},
		{"LeaseIsExclusive", testLeaseIsExclusive},
		{"LeaseWaitsForRelease", testLeaseWaitsForRelease},
		{"LeaseOfMissingSession", testLeaseOfMissingSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, &suite{newStore: newStore, prefix: prefix + "-" + tc.name})
		})
	}
}

var ctx = context.Background()

// epoch is whole microseconds: Postgres keeps event times to the microsecond.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

type suite struct {
	newStore func(t *testing.T) session.Store
	prefix   string
}

// id returns a session id unique to this run and test.
func (c *suite) id(name string) string { return c.prefix + "-" + name }

// create creates a session and removes it when the test ends.
func (c *suite) create(t *testing.T, s session.Store, name string) string {
	t.Helper()
	h := header(c.id(name))
	require.NoError(t, s.Create(ctx, h))
	t.Cleanup(func() { assert.NoError(t, s.Remove(ctx, h.ID)) })
	return h.ID
}

func header(id string) session.Header {
	return session.Header{
		ID:              id,
		Cwd:             "/work/project",
		ParentSession:   "parent-1",
		Origin:          session.OriginSubagent,
		DelegationDepth: 1,
		AgentPreset:     "coder",
		Route:           &session.Route{Provider: "deepseek", Model: "deepseek-chat", MaxTokens: 4096},
	}
}

// events returns n chunk events numbered from first; the same seq gives the same event.
func events(t testing.TB, first, n int) []session.Event {
	t.Helper()
	out := make([]session.Event, n)
	for i := range out {
		seq := first + i
		e, err := session.NewEvent(session.TypeAssistantChunk, session.AssistantChunkData{
			Turn: 1, Step: 1,
			Chunk: session.Chunk{Type: session.ChunkTextDelta, Index: seq, Text: fmt.Sprintf("text <%d> & \"more\"\n", seq)},
		})
		require.NoError(t, err)
		e.Seq = int64(seq)
		e.Time = epoch.Add(time.Duration(seq) * time.Millisecond)
		out[i] = e
	}
	return out
}

func load(t *testing.T, s session.Store, id string) []session.Event {
	t.Helper()
	_, got, err := s.Load(ctx, id)
	require.NoError(t, err)
	return got
}

func testCreateIfAbsent(t *testing.T, c *suite) {
	s := c.newStore(t)
	id := c.create(t, s, "s")
	h := header(id)
	require.NoError(t, s.Create(ctx, h), "the same header again is a no-op")
	require.NoError(t, c.newStore(t).Create(ctx, h), "also from another store")

	got, evs, err := s.Load(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, h, got)
	assert.Empty(t, evs)

	other := h
	other.DelegationDepth = 2
	err = s.Create(ctx, other)
	require.ErrorIs(t, err, session.ErrHeaderMismatch)
	assert.Contains(t, err.Error(), id)
	other = h
	other.Route = &session.Route{Provider: "deepseek", Model: "deepseek-reasoner"}
	require.ErrorIs(t, s.Create(ctx, other), session.ErrHeaderMismatch)

	bareID := c.id("bare")
	bare := session.Header{ID: bareID, Cwd: "/"}
	require.NoError(t, s.Create(ctx, bare))
	t.Cleanup(func() { assert.NoError(t, s.Remove(ctx, bareID)) })
	bare.Route = &session.Route{}
	require.NoError(t, s.Create(ctx, bare), "a zero route is no route")
}

func testCreateRejectsInvalidHeader(t *testing.T, c *suite) {
	s := c.newStore(t)
	for name, mutate := range map[string]func(*session.Header){
		"relative cwd":   func(h *session.Header) { h.Cwd = "work/project" },
		"origin parent":  func(h *session.Header) { h.Origin = "parent" },
		"negative depth": func(h *session.Header) { h.DelegationDepth = -1 },
	} {
		h := header(c.id("s"))
		mutate(&h)
		err := s.Create(ctx, h)
		require.ErrorIs(t, err, session.ErrInvalidHeader, name)
		assert.Contains(t, err.Error(), h.ID)
		_, _, err = s.Load(ctx, h.ID)
		require.ErrorIs(t, err, session.ErrNotFound, "%s: nothing is created", name)
	}
}

func testInvalidIDs(t *testing.T, c *suite) {
	s := c.newStore(t)
	for _, id := range []string{"", ".", "..", "../escape", "a/b", `a\b`, "nul\x00"} {
		errs := []error{
			s.Create(ctx, session.Header{ID: id, Cwd: "/"}),
			s.Append(ctx, id, events(t, 0, 1)...),
			s.Sync(ctx, id),
			s.Remove(ctx, id),
		}
		_, _, err := s.Load(ctx, id)
		errs = append(errs, err)
		if l, ok := s.(session.Leaser); ok {
			_, err := l.Lease(ctx, id)
			errs = append(errs, err)
		}
		for _, err := range errs {
			require.ErrorIs(t, err, session.ErrInvalidID, "id %q", id)
			assert.Contains(t, err.Error(), fmt.Sprintf("%q", id))
		}
	}
}

func testAppendLoadRoundTrip(t *testing.T, c *suite) {
	s := c.newStore(t)
	id := c.create(t, s, "s")

	var want []session.Event
	add := func(typ string, data any) {
		e, err := session.NewEvent(typ, data)
		require.NoError(t, err)
		e.Seq = int64(len(want))
		e.Time = epoch.Add(time.Duration(e.Seq) * time.Second)
		want = append(want, e)
	}
	add(session.TypeTurnStart, session.TurnStartData{Turn: 1})
	add(session.TypeStepStart, session.StepData{Turn: 1, Step: 1})
	require.NoError(t, s.Append(ctx, id, want...))
	add(session.TypeAssistantMessage, session.AssistantMessageData{
		Turn: 1, Step: 1,
		Message: session.AssistantMessage{ID: "m1", Role: "assistant", Content: []session.Block{
			// Tool output may hold any text, NUL bytes included.
			session.Text("line one\nline two <b>&amp;</b> \x00 ünïcødé 🙂"),
			{Type: session.BlockToolCall, ID: "c1", Name: "read", Input: json.RawMessage(`{"path":"a.go","z":1,"a":[2,1]}`)},
		}},
		Usage: &session.Usage{InputTokens: 10, OutputTokens: 5},
	})
	add(session.TypeTurnEnd, session.TurnEndData{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}})
	require.NoError(t, s.Append(ctx, id, want[2:]...))
	require.NoError(t, s.Append(ctx, id), "an empty append is a no-op")
	require.NoError(t, s.Sync(ctx, id))

	h, got, err := s.Load(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, header(id), h)
	assert.Equal(t, want, got, "the log holds the appended events byte for byte")

	h, got, err = c.newStore(t).Load(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, header(id), h, "another store reads the same session")
	assert.Equal(t, want, got)
}

func testSeqConflictWritesNothing(t *testing.T, c *suite) {
	s := c.newStore(t)
	id := c.create(t, s, "s")
	require.NoError(t, s.Append(ctx, id, events(t, 0, 3)...))

	for name, batch := range map[string][]session.Event{
		"repeated seq":    events(t, 2, 1),
		"gap":             events(t, 4, 1),
		"gap in batch":    append(events(t, 3, 2), events(t, 6, 1)...),
		"repeat in batch": append(events(t, 3, 2), events(t, 4, 1)...),
	} {
		err := s.Append(ctx, id, batch...)
		require.ErrorIs(t, err, session.ErrSeqConflict, name)
		assert.Contains(t, err.Error(), id)
	}
	assert.Equal(t, events(t, 0, 3), load(t, s, id), "the log is unchanged")

	require.NoError(t, s.Append(ctx, id, events(t, 3, 1)...), "the right seq still appends")
	assert.Equal(t, events(t, 0, 4), load(t, s, id))
}

func testAppendRejectsUnencodableData(t *testing.T, c *suite) {
	s := c.newStore(t)
	id := c.create(t, s, "s")
	bad := events(t, 0, 2)
	bad[1].Data = json.RawMessage("{not json")
	err := s.Append(ctx, id, bad...)
	require.Error(t, err)
	assert.False(t, errors.Is(err, session.ErrSeqConflict))
	assert.Empty(t, load(t, s, id), "nothing of the failed batch was written")
	require.NoError(t, s.Append(ctx, id, events(t, 0, 1)...))
}

func testMissingSession(t *testing.T, c *suite) {
	s := c.newStore(t)
	id := c.id("nope")
	_, _, err := s.Load(ctx, id)
	require.ErrorIs(t, err, session.ErrNotFound)
	assert.Contains(t, err.Error(), id)
	require.ErrorIs(t, s.Append(ctx, id, events(t, 0, 1)...), session.ErrNotFound)
	require.ErrorIs(t, s.Append(ctx, id, events(t, 3, 1)...), session.ErrNotFound)
	require.ErrorIs(t, s.Sync(ctx, id), session.ErrNotFound)
	require.NoError(t, s.Remove(ctx, id), "removing an absent session is not an error")
	_, _, err = s.Load(ctx, id)
	require.ErrorIs(t, err, session.ErrNotFound, "a failed append creates nothing")
}

func testSubscribe(t *testing.T, c *suite) {
	s := c.newStore(t)
	id, other := c.create(t, s, "s"), c.create(t, s, "other")

	var all, firstThree []session.Event
	stopAll := s.Subscribe(id, func(e session.Event) { all = append(all, e) })
	var stopSelf func()
	stopSelf = s.Subscribe(id, func(e session.Event) {
		firstThree = append(firstThree, e)
		if len(firstThree) == 3 {
			stopSelf() // from inside the callback
		}
	})
	var others []session.Event
	defer s.Subscribe(other, func(e session.Event) { others = append(others, e) })()

	require.NoError(t, s.Append(ctx, id, events(t, 0, 2)...))
	require.Error(t, s.Append(ctx, id, events(t, 5, 1)...))
	require.NoError(t, s.Append(ctx, id, events(t, 2, 3)...))
	stopAll()
	stopAll()
	require.NoError(t, s.Append(ctx, id, events(t, 5, 1)...))

	assert.Equal(t, events(t, 0, 5), all, "exactly the appended events, in order")
	assert.Equal(t, events(t, 0, 3), firstThree)
	assert.Empty(t, others)
	assert.Equal(t, events(t, 0, 6), load(t, s, id), "subscribers saw what the log holds")
}

func testSubscribersSeeSeqOrder(t *testing.T, c *suite) {
	s := c.newStore(t)
	id := c.create(t, s, "s")
	var seen []int64
	defer s.Subscribe(id, func(e session.Event) { seen = append(seen, e.Seq) })()

	// Writers race for each seq; exactly one wins each.
	const total = 100
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { appendUntil(t, s, id, total) })
	}
	wg.Wait()
	require.Len(t, seen, total)
	for i, seq := range seen {
		require.Equal(t, int64(i), seq)
	}
}

// appendUntil appends batches of one to three events, re-reading the log after each conflict,
// until it holds total events.
func appendUntil(t *testing.T, s session.Store, id string, total int) {
	next := 0
	for next < total {
		n := min(1+next%3, total-next)
		err := s.Append(ctx, id, events(t, next, n)...)
		if err == nil {
			next += n
			continue
		}
		if !assert.ErrorIs(t, err, session.ErrSeqConflict) {
			return
		}
		_, got, err := s.Load(ctx, id)
		if !assert.NoError(t, err) {
			return
		}
		next = len(got)
	}
}

func testRemove(t *testing.T, c *suite) {
	s, other := c.newStore(t), c.newStore(t)
	id := c.id("s")
	require.NoError(t, s.Create(ctx, header(id)))
	require.NoError(t, s.Append(ctx, id, events(t, 0, 3)...))
	require.NoError(t, other.Append(ctx, id, events(t, 3, 1)...))

	require.NoError(t, s.Remove(ctx, id))
	_, _, err := s.Load(ctx, id)
	require.ErrorIs(t, err, session.ErrNotFound)
	_, _, err = other.Load(ctx, id)
	require.ErrorIs(t, err, session.ErrNotFound)
	require.ErrorIs(t, other.Append(ctx, id, events(t, 4, 1)...), session.ErrNotFound)
	require.NoError(t, s.Remove(ctx, id), "removing again is fine")

	c.create(t, s, "s")
	require.NoError(t, other.Append(ctx, id, events(t, 0, 1)...), "a new session starts at seq 0")
	require.NoError(t, s.Append(ctx, id, events(t, 1, 1)...))
	assert.Equal(t, events(t, 0, 2), load(t, s, id))
}

func testTwoStoresContinueOneLog(t *testing.T, c *suite) {
	a, b := c.newStore(t), c.newStore(t)
	id := c.create(t, a, "s")
	require.NoError(t, a.Append(ctx, id, events(t, 0, 3)...))

	require.NoError(t, b.Append(ctx, id, events(t, 3, 2)...), "a fresh store continues the seq")
	require.ErrorIs(t, a.Append(ctx, id, events(t, 3, 1)...), session.ErrSeqConflict,
		"the first store sees what the second appended behind its back")
	require.NoError(t, a.Append(ctx, id, events(t, 5, 1)...))
	assert.Equal(t, events(t, 0, 6), load(t, b, id))
}

func testTwoStoresCannotInterleave(t *testing.T, c *suite) {
	a, b := c.newStore(t), c.newStore(t)
	id := c.create(t, a, "s")
	const total = 150
	var wg sync.WaitGroup
	for _, s := range []session.Store{a, b, a, b} {
		wg.Go(func() { appendUntil(t, s, id, total) })
	}
	wg.Wait()
	// Dense, and every event exactly once: each batch landed whole or not at all.
	assert.Equal(t, events(t, 0, total), load(t, a, id))
	assert.Equal(t, events(t, 0, total), load(t, b, id))
}

// leasers returns two store instances over the same data, or skips the test if the store
// grants no leases.
func (c *suite) leasers(t *testing.T) (session.Store, session.Leaser, session.Leaser) {
	a, b := c.newStore(t), c.newStore(t)
	la, ok := a.(session.Leaser)
	if !ok {
		t.Skipf("%T does not implement session.Leaser", a)
	}
	return a, la, b.(session.Leaser)
}

func testLeaseIsExclusive(t *testing.T, c *suite) {
	a, la, lb := c.leasers(t)
	id, other := c.create(t, a, "s"), c.create(t, a, "other")

	release, err := la.Lease(ctx, id)
	require.NoError(t, err)
	done, cancel := context.WithCancel(ctx)
	cancel() // a done context asks without waiting
	for name, l := range map[string]session.Leaser{"another store": lb, "the same store": la} {
		_, err = l.Lease(done, id)
		require.ErrorIs(t, err, session.ErrLeased, name)
		require.ErrorIs(t, err, context.Canceled, name)
		assert.Contains(t, err.Error(), id, "the error names the session")
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = lb.Lease(short, id)
	require.ErrorIs(t, err, session.ErrLeased, "waiting until the deadline")

	releaseOther, err := lb.Lease(done, other)
	require.NoError(t, err, "leases of other sessions are independent; a free lease is granted even to a done context")
	require.NoError(t, releaseOther())

	require.NoError(t, a.Append(ctx, id, events(t, 0, 2)...), "a lease does not stop appends")
	require.NoError(t, release())
	require.NoError(t, release(), "release may be called again")

	release, err = lb.Lease(ctx, id)
	require.NoError(t, err, "a released lease can be taken")
	require.NoError(t, release())
}

func testLeaseWaitsForRelease(t *testing.T, c *suite) {
	a, la, lb := c.leasers(t)
	id := c.create(t, a, "s")
	release, err := la.Lease(ctx, id)
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		releaseB, err := lb.Lease(wait, id)
		if err == nil {
			err = releaseB()
		}
		got <- err
	}()
	// Not an assertion on time: the pause only makes it likely the waiter is already waiting.
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("a second Lease returned while the first was held: %v", err)
	default:
	}
	require.NoError(t, release())
	require.NoError(t, <-got, "the waiter gets the lease once it is released")
}

func testLeaseOfMissingSession(t *testing.T, c *suite) {
	_, la, _ := c.leasers(t)
	_, err := la.Lease(ctx, c.id("nope"))
	require.ErrorIs(t, err, session.ErrNotFound)
}
