// Package storetest is the contract suite every session.Store runs: the behaviour the Store
// and Leaser doc comments promise, checked the same way for the file store and for Postgres.
//
// A store's own tests add what only it can show (torn lines of a file, a crashed process
// holding a lease); this suite needs nothing but the Store. BenchmarkBatchTask measures a
// store the same way for both.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
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
// session.Leaser get the lease tests too, stores that implement session.Retainer the owner
// tests; stores that do not skip them.
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
		{"LeaseExpires", testLeaseExpires},
		{"StaleTokenIsFenced", testStaleTokenIsFenced},
		{"TakeoverFencesRacingHolder", testTakeoverFencesRacingHolder},
		{"FrozenHolderLosesLease", testFrozenHolderLosesLease},
		{"OwnedListsByAgeAndID", testOwnedListsByAgeAndID},
		{"OwnBeforeCreate", testOwnBeforeCreate},
		{"RemoveOwnedSparesTouched", testRemoveOwnedSparesTouched},
		{"RemoveForgetsOwners", testRemoveForgetsOwners},
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
			_, err := l.TryLease(ctx, id, time.Minute)
			errs = append(errs, err, l.RenewLease(ctx, id, 1, time.Minute), l.ReleaseLease(ctx, id, 1),
				l.AppendFenced(ctx, id, 1, events(t, 0, 1)...))
			_, err = session.TakeLease(ctx, l, id, time.Minute)
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

// leaseTTL is the ttl of leases meant to outlive the test.
const leaseTTL = time.Minute

func testLeaseIsExclusive(t *testing.T, c *suite) {
	a, la, lb := c.leasers(t)
	id, other := c.create(t, a, "s"), c.create(t, a, "other")

	lease, err := session.TakeLease(ctx, la, id, leaseTTL)
	require.NoError(t, err)
	done, cancel := context.WithCancel(ctx)
	cancel() // a done context asks without waiting
	for name, l := range map[string]session.Leaser{"another store": lb, "the same store": la} {
		_, err = session.TakeLease(done, l, id, leaseTTL)
		require.ErrorIs(t, err, session.ErrLeased, name)
		require.ErrorIs(t, err, context.Canceled, name)
		assert.Contains(t, err.Error(), id, "the error names the session")
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = session.TakeLease(short, lb, id, leaseTTL)
	require.ErrorIs(t, err, session.ErrLeased, "waiting until the deadline")

	leaseOther, err := session.TakeLease(done, lb, other, leaseTTL)
	require.NoError(t, err, "leases of other sessions are independent; a free lease is granted even to a done context")
	require.NoError(t, leaseOther.Release())

	require.NoError(t, a.Append(ctx, id, events(t, 0, 2)...), "a lease does not stop unfenced appends")
	require.NoError(t, lease.Store().Append(ctx, id, events(t, 2, 1)...), "the holder appends through its fenced store")
	require.NoError(t, lease.Release())
	require.NoError(t, lease.Release(), "release may be called again")

	next, err := session.TakeLease(ctx, lb, id, leaseTTL)
	require.NoError(t, err, "a released lease can be taken")
	assert.Greater(t, next.Token(), lease.Token(), "tokens grow")
	require.NoError(t, next.Release())
}

func testLeaseWaitsForRelease(t *testing.T, c *suite) {
	a, la, lb := c.leasers(t)
	id := c.create(t, a, "s")
	lease, err := session.TakeLease(ctx, la, id, leaseTTL)
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		leaseB, err := session.TakeLease(wait, lb, id, leaseTTL)
		if err == nil {
			err = leaseB.Release()
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
	require.NoError(t, lease.Release())
	require.NoError(t, <-got, "the waiter gets the lease once it is released")
}

func testLeaseOfMissingSession(t *testing.T, c *suite) {
	_, la, _ := c.leasers(t)
	_, err := session.TakeLease(ctx, la, c.id("nope"), leaseTTL)
	require.ErrorIs(t, err, session.ErrNotFound)
	require.ErrorIs(t, la.AppendFenced(ctx, c.id("nope"), 1, events(t, 0, 1)...), session.ErrNotFound)
}

// staleTTL is the ttl of a lease whose holder never renews it: a holder frozen or cut off.
const staleTTL = 100 * time.Millisecond

// testLeaseExpires: a lease that is not renewed ends by itself; its holder may keep writing
// until another holder takes it.
func testLeaseExpires(t *testing.T, c *suite) {
	a, la, lb := c.leasers(t)
	id := c.create(t, a, "s")
	stale, err := la.TryLease(ctx, id, staleTTL)
	require.NoError(t, err)
	_, err = lb.TryLease(ctx, id, leaseTTL)
	require.ErrorIs(t, err, session.ErrLeased)

	waitExpired()
	require.NoError(t, la.AppendFenced(ctx, id, stale, events(t, 0, 1)...),
		"an expired lease nobody took still fences for its holder")
	require.NoError(t, la.RenewLease(ctx, id, stale, staleTTL), "and may be renewed")

	waitExpired()
	lease, err := session.TakeLease(ctx, lb, id, leaseTTL)
	require.NoError(t, err, "an expired lease is granted")
	assert.Greater(t, lease.Token(), stale)
	require.NoError(t, lease.Release())
}

// waitExpired waits until a lease granted or renewed for staleTTL before the call has expired.
// Expiry is time passing, so waiting is the condition itself; TryLease cannot be asked (it
// would take the lease).
func waitExpired() { time.Sleep(staleTTL + 10*time.Millisecond) }

// testStaleTokenIsFenced is two stores racing with a stale fencing token: a holder whose lease
// expired and was taken over keeps appending, and nothing it writes lands.
func testStaleTokenIsFenced(t *testing.T, c *suite) {
	a, la, lb := c.leasers(t)
	id := c.create(t, a, "s")
	stale, err := la.TryLease(ctx, id, staleTTL)
	require.NoError(t, err)
	require.NoError(t, la.AppendFenced(ctx, id, stale, events(t, 0, 1)...))
	// lb waits for the expiry (the stale holder never renews) and takes over.
	lease, err := session.TakeLease(ctx, lb, id, leaseTTL)
	require.NoError(t, err)
	defer lease.Release()
	require.Greater(t, lease.Token(), stale)

	var wg sync.WaitGroup
	wg.Go(func() { // the current holder
		appendUntil(t, lease.Store(), id, 40)
	})
	wg.Go(func() { // the stale holder, in the other store, trying every seq
		for seq := range 40 {
			err := la.AppendFenced(ctx, id, stale, events(t, seq, 1)...)
			var fenced *session.FencedError
			if assert.ErrorAs(t, err, &fenced, "seq %d", seq) {
				assert.Equal(t, stale, fenced.Token)
			}
			assert.ErrorIs(t, err, session.ErrFenced)
			assert.Contains(t, err.Error(), id, "the error names the session")
		}
	})
	wg.Wait()
	assert.Equal(t, events(t, 0, 40), load(t, a, id), "only the current holder's appends landed")

	require.ErrorIs(t, la.RenewLease(ctx, id, stale, leaseTTL), session.ErrFenced, "a stale holder cannot renew")
	require.NoError(t, la.ReleaseLease(ctx, id, stale), "releasing a stale token does nothing")
	_, err = la.TryLease(ctx, id, leaseTTL)
	require.ErrorIs(t, err, session.ErrLeased, "the current lease survives the stale release")
}

// testTakeoverFencesRacingHolder: a holder appends without pause while its lease expires and
// another holder takes it; from the takeover on, none of its appends lands.
func testTakeoverFencesRacingHolder(t *testing.T, c *suite) {
	a, la, lb := c.leasers(t)
	id := c.create(t, a, "s")
	stale, err := la.TryLease(ctx, id, staleTTL)
	require.NoError(t, err)

	staleDone := make(chan int, 1) // how many the stale holder appended before it was fenced
	go func() {
		n := 0
		for {
			err := la.AppendFenced(ctx, id, stale, events(t, n, 1)...)
			if err != nil {
				assert.ErrorIs(t, err, session.ErrFenced, "the stale holder is only ever fenced, never in conflict")
				staleDone <- n
				return
			}
			n++
		}
	}()
	lease, err := session.TakeLease(ctx, lb, id, leaseTTL)
	require.NoError(t, err)
	defer lease.Release()
	// Loaded after the takeover: every later append of the stale holder must fail.
	n := len(load(t, a, id))
	require.NoError(t, lease.Store().Append(ctx, id, events(t, n, 3)...))
	appended := <-staleDone
	assert.Equal(t, n, appended, "the stale holder wrote nothing after the takeover")
	assert.Equal(t, events(t, 0, n+3), load(t, a, id))
}

// frozenLeaser is a Leaser whose renewals wait until thaw is closed, as those of a holder whose
// process is stopped (SIGSTOP) or cut off from the store do.
type frozenLeaser struct {
	session.Leaser
	thaw chan struct{}
}

func (f frozenLeaser) RenewLease(_ context.Context, id string, token int64, ttl time.Duration) error {
	<-f.thaw
	return f.Leaser.RenewLease(ctx, id, token, ttl)
}

// testFrozenHolderLosesLease: a holder that cannot renew loses the lease to another; once it
// runs again it learns so (Lost) and its fenced store writes nothing.
func testFrozenHolderLosesLease(t *testing.T, c *suite) {
	a, la, lb := c.leasers(t)
	id := c.create(t, a, "s")
	frozen := frozenLeaser{la, make(chan struct{})}
	old, err := session.TakeLease(ctx, frozen, id, staleTTL)
	require.NoError(t, err)
	lease, err := session.TakeLease(ctx, lb, id, leaseTTL) // waits for the expiry
	require.NoError(t, err)
	defer lease.Release()
	require.NoError(t, lease.Store().Append(ctx, id, events(t, 0, 1)...))

	close(frozen.thaw)
	<-old.Lost()
	require.ErrorIs(t, old.Err(), session.ErrFenced, "the first renewal after the thaw finds the token stale")
	require.ErrorIs(t, old.Store().Append(ctx, id, events(t, 1, 1)...), session.ErrFenced)
	require.NoError(t, old.Release(), "releasing a lost lease is harmless")
	require.NoError(t, lease.Store().Append(ctx, id, events(t, 1, 1)...), "the new holder's lease survives")
	assert.Equal(t, events(t, 0, 2), load(t, a, id))
}

// retainer returns the store as a session.Retainer, or skips the test.
func (c *suite) retainer(t *testing.T) session.Retainer {
	t.Helper()
	r, ok := c.newStore(t).(session.Retainer)
	if !ok {
		t.Skip("the store records no owners (session.Retainer)")
	}
	return r
}

// owned lists this test's sessions with owners recorded before before, from after on, in
// pages of limit.
func (c *suite) owned(t *testing.T, r session.Retainer, after string, before time.Time, limit int) []session.Owned {
	t.Helper()
	if after == "" {
		after = c.prefix
	}
	got, err := r.Owned(ctx, session.OwnedQuery{After: after, Before: before, Limit: limit})
	require.NoError(t, err)
	var mine []session.Owned
	for _, o := range got {
		if strings.HasPrefix(o.ID, c.prefix+"-") {
			mine = append(mine, o)
		}
	}
	return mine
}

func ids(owned []session.Owned) []string {
	out := make([]string, len(owned))
	for i, o := range owned {
		out[i] = o.ID
	}
	return out
}

func testOwnedListsByAgeAndID(t *testing.T, c *suite) {
	r := c.retainer(t)
	a, b := c.create(t, r, "a"), c.create(t, r, "b")
	c.create(t, r, "unowned")
	require.NoError(t, r.Own(ctx, b, "wf-2"))
	require.NoError(t, r.Own(ctx, b, "wf-1"))
	require.NoError(t, r.Own(ctx, b, "wf-1"), "recording an owner again is no error")
	require.NoError(t, r.Append(ctx, b, events(t, 0, 3)...))
	require.NoError(t, r.Own(ctx, a, "wf-1"))
	time.Sleep(10 * time.Millisecond)  // past the store clock's resolution
	cut := time.Now().Add(time.Second) // a database clock a little ahead is still before it

	assert.Empty(t, c.owned(t, r, "", time.Now().Add(-time.Hour), 100), "nothing was owned an hour ago")
	got := c.owned(t, r, "", cut, 100)
	require.Equal(t, []string{a, b}, ids(got), "in id order, the unowned session not at all")
	assert.Equal(t, []string{"wf-1", "wf-2"}, got[1].Owners, "each owner once, sorted")
	assert.Less(t, got[0].Size, got[1].Size, "b holds three events more")
	assert.Positive(t, got[0].Size, "a's header takes room")
	assert.WithinDuration(t, time.Now(), got[1].Touched, time.Minute)

	first := c.owned(t, r, "", cut, 1)
	require.Equal(t, []string{a}, ids(first), "a page of one")
	assert.Equal(t, []string{b}, ids(c.owned(t, r, a, cut, 100)), "the next page starts after a")

	_, err := r.Owned(ctx, session.OwnedQuery{Before: cut})
	assert.Error(t, err, "a limit of 0 is refused")
}

func testOwnBeforeCreate(t *testing.T, c *suite) {
	r := c.retainer(t)
	id := c.id("s")
	require.NoError(t, r.Own(ctx, id, "wf"))
	t.Cleanup(func() { assert.NoError(t, r.Remove(ctx, id)) })
	_, _, err := r.Load(ctx, id)
	require.ErrorIs(t, err, session.ErrNotFound, "an owner makes no session")
	require.NoError(t, r.Create(ctx, header(id)))
	require.NoError(t, r.Append(ctx, id, events(t, 0, 1)...))
	got := c.owned(t, r, "", time.Now().Add(time.Second), 100)
	require.Equal(t, []string{id}, ids(got))
	assert.Equal(t, []string{"wf"}, got[0].Owners)

	other := c.id("never-created")
	require.NoError(t, r.Own(ctx, other, "wf"))
	t.Cleanup(func() { assert.NoError(t, r.Remove(ctx, other)) })
	got = c.owned(t, r, "", time.Now().Add(time.Second), 100)
	require.Len(t, got, 2, "an owner of a session never created is listed, to be removed")
	removed, err := r.RemoveOwned(ctx, other, got[0].Touched)
	require.NoError(t, err)
	assert.True(t, removed)
	assert.Equal(t, []string{id}, ids(c.owned(t, r, "", time.Now().Add(time.Second), 100)))
}

func testRemoveOwnedSparesTouched(t *testing.T, c *suite) {
	r := c.retainer(t)
	id := c.create(t, r, "s")
	require.NoError(t, r.Own(ctx, id, "old"))
	require.NoError(t, r.Append(ctx, id, events(t, 0, 2)...))
	time.Sleep(10 * time.Millisecond)
	listed := c.owned(t, r, "", time.Now().Add(time.Second), 100)
	require.Len(t, listed, 1)

	time.Sleep(10 * time.Millisecond)
	require.NoError(t, r.Own(ctx, id, "new"), "a run starts to use the session after the listing")
	removed, err := r.RemoveOwned(ctx, id, listed[0].Touched)
	require.NoError(t, err)
	assert.False(t, removed, "an owner recorded after the listing keeps the session")
	assert.Len(t, load(t, r, id), 2, "nothing of it was removed")

	relisted := c.owned(t, r, "", time.Now().Add(time.Second), 100)
	require.Len(t, relisted, 1)
	assert.Equal(t, []string{"new", "old"}, relisted[0].Owners)
	removed, err = c.newStore(t).(session.Retainer).RemoveOwned(ctx, id, relisted[0].Touched)
	require.NoError(t, err)
	assert.True(t, removed, "another store instance removes it")
	_, _, err = r.Load(ctx, id)
	require.ErrorIs(t, err, session.ErrNotFound)
	assert.Empty(t, c.owned(t, r, "", time.Now().Add(time.Second), 100), "its owners went with it")

	removed, err = r.RemoveOwned(ctx, id, relisted[0].Touched)
	require.NoError(t, err)
	assert.False(t, removed, "removing it again removes nothing")
	unowned := c.create(t, r, "unowned")
	removed, err = r.RemoveOwned(ctx, unowned, time.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, removed, "a session without owners is never removed")
	assert.Empty(t, load(t, r, unowned))
}

func testRemoveForgetsOwners(t *testing.T, c *suite) {
	r := c.retainer(t)
	id := c.create(t, r, "s")
	require.NoError(t, r.Own(ctx, id, "wf"))
	require.NoError(t, r.Remove(ctx, id))
	assert.Empty(t, c.owned(t, r, "", time.Now().Add(time.Second), 100))
	require.NoError(t, r.Own(ctx, id, "wf2"), "removed and owned again, as a stored payload is replaced")
	require.NoError(t, r.Create(ctx, header(id)))
	got := c.owned(t, r, "", time.Now().Add(time.Second), 100)
	require.Len(t, got, 1)
	assert.Equal(t, []string{"wf2"}, got[0].Owners)
}
