package filestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
)

var (
	ctx   = context.Background()
	epoch = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
)

func newStore(t testing.TB, root string) *filestore.Store {
	t.Helper()
	s, err := filestore.New(root)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
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

// events returns n chunk events numbered from first.
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
		e.Time = epoch.Add(time.Duration(seq) * time.Millisecond) // the same event on every call
		out[i] = e
	}
	return out
}

func eventsPath(s *filestore.Store, id string) string {
	return filepath.Join(s.Root(), id, "events.jsonl")
}

func TestCreateIfAbsent(t *testing.T) {
	s := newStore(t, t.TempDir())
	h := header("child-1")
	require.NoError(t, s.Create(ctx, h))
	require.NoError(t, s.Create(ctx, h), "same header again is a no-op")

	got, evs, err := s.Load(ctx, "child-1")
	require.NoError(t, err)
	assert.Equal(t, h, got)
	assert.Empty(t, evs)

	other := h
	other.DelegationDepth = 2
	err = s.Create(ctx, other)
	require.ErrorIs(t, err, session.ErrHeaderMismatch)
	assert.Contains(t, err.Error(), "session: create child-1: ")

	other = h
	other.Route = &session.Route{Provider: "deepseek", Model: "deepseek-reasoner"}
	require.ErrorIs(t, s.Create(ctx, other), session.ErrHeaderMismatch)
}

func TestCreateComparesHeadersByValue(t *testing.T) {
	s := newStore(t, t.TempDir())
	h := header("child-1")
	require.NoError(t, s.Create(ctx, h))

	// Another writer may format the same header differently.
	path := filepath.Join(s.Root(), "child-1", "header.json")
	require.NoError(t, os.WriteFile(path, []byte(`{
  "route": {"model": "deepseek-chat", "maxTokens": 4096, "provider": "deepseek"},
  "agentPreset": "coder", "delegationDepth": 1, "origin": "subagent",
  "parentSession": "parent-1", "cwd": "/work/project", "id": "child-1"
}`), 0o644))
	require.NoError(t, s.Create(ctx, h))

	bare := session.Header{ID: "bare", Cwd: "/"}
	require.NoError(t, s.Create(ctx, bare))
	bare.Route = &session.Route{}
	require.NoError(t, s.Create(ctx, bare), "a zero route is no route")
}

func TestCreateRejectsInvalidHeader(t *testing.T) {
	for name, mutate := range map[string]func(*session.Header){
		"relative cwd":   func(h *session.Header) { h.Cwd = "work/project" },
		"origin parent":  func(h *session.Header) { h.Origin = "parent" },
		"negative depth": func(h *session.Header) { h.DelegationDepth = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, t.TempDir())
			h := header("child-1")
			mutate(&h)
			err := s.Create(ctx, h)
			require.ErrorIs(t, err, session.ErrInvalidHeader)
			assert.Contains(t, err.Error(), "session: create child-1: ")
			assert.NoDirExists(t, filepath.Join(s.Root(), "child-1"), "nothing is created")
		})
	}
}

func TestAppendLoadRoundTrip(t *testing.T) {
	s := newStore(t, t.TempDir())
	require.NoError(t, s.Create(ctx, header("s")))

	var want []session.Event
	add := func(typ string, data any) {
		e, err := session.NewEvent(typ, data)
		require.NoError(t, err)
		e.Seq = int64(len(want))
		want = append(want, e)
	}
	add(session.TypeTurnStart, session.TurnStartData{Turn: 1})
	add(session.TypeStepStart, session.StepData{Turn: 1, Step: 1})
	require.NoError(t, s.Append(ctx, "s", want...))
	add(session.TypeAssistantMessage, session.AssistantMessageData{
		Turn: 1, Step: 1,
		Message: session.AssistantMessage{ID: "m1", Role: "assistant", Content: []session.Block{
			session.Text("line one\nline two"),
			{Type: session.BlockToolCall, ID: "c1", Name: "read", Input: json.RawMessage(`{"path":"a.go"}`)},
		}},
		Usage: &session.Usage{InputTokens: 10, OutputTokens: 5},
	})
	add(session.TypeTurnEnd, session.TurnEndData{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}})
	require.NoError(t, s.Append(ctx, "s", want[2:]...))
	require.NoError(t, s.Append(ctx, "s"), "an empty append is a no-op")
	require.NoError(t, s.Sync(ctx, "s"))

	h, got, err := s.Load(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, header("s"), h)
	assert.Equal(t, want, got)

	raw, err := os.ReadFile(eventsPath(s, "s"))
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	require.Len(t, lines, len(want), "one line per event")
	for _, line := range lines {
		var buf bytes.Buffer
		require.NoError(t, json.Compact(&buf, line))
		assert.Equal(t, buf.String(), string(line), "lines are compact JSON")
	}

	_, _, err = newStore(t, s.Root()).Load(ctx, "s")
	require.NoError(t, err, "another store reads the same files")
}

func TestMissingSession(t *testing.T) {
	s := newStore(t, t.TempDir())
	_, _, err := s.Load(ctx, "nope")
	require.ErrorIs(t, err, session.ErrNotFound)
	assert.EqualError(t, err, "session: load nope: session not found")
	require.ErrorIs(t, s.Append(ctx, "nope", events(t, 0, 1)...), session.ErrNotFound)
	require.ErrorIs(t, s.Sync(ctx, "nope"), session.ErrNotFound)
	assert.NoDirExists(t, filepath.Join(s.Root(), "nope"))
}

func TestSeqConflictWritesNothing(t *testing.T) {
	s := newStore(t, t.TempDir())
	require.NoError(t, s.Create(ctx, header("s")))
	require.NoError(t, s.Append(ctx, "s", events(t, 0, 3)...))
	before, err := os.ReadFile(eventsPath(s, "s"))
	require.NoError(t, err)

	for name, batch := range map[string][]session.Event{
		"repeated seq": events(t, 2, 1),
		"gap":          events(t, 4, 1),
		"gap in batch": append(events(t, 3, 2), events(t, 6, 1)...),
	} {
		err := s.Append(ctx, "s", batch...)
		require.ErrorIs(t, err, session.ErrSeqConflict, name)
		assert.Contains(t, err.Error(), "session: append s: ")
	}
	after, err := os.ReadFile(eventsPath(s, "s"))
	require.NoError(t, err)
	assert.Equal(t, before, after)

	require.NoError(t, s.Append(ctx, "s", events(t, 3, 1)...), "the right seq still appends")
}

func TestTornTailIsIgnoredAndCut(t *testing.T) {
	root := t.TempDir()
	first := newStore(t, root)
	require.NoError(t, first.Create(ctx, header("s")))
	require.NoError(t, first.Append(ctx, "s", events(t, 0, 5)...))
	require.NoError(t, first.Sync(ctx, "s"))
	require.NoError(t, first.Close())

	// A crash mid-write leaves part of the last line.
	path := filepath.Join(root, "s", "events.jsonl")
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, info.Size()-7))

	s := newStore(t, root)
	_, got, err := s.Load(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, events(t, 0, 4), got, "earlier events are intact")

	require.ErrorIs(t, s.Append(ctx, "s", events(t, 5, 1)...), session.ErrSeqConflict, "the torn event does not count")
	require.NoError(t, s.Append(ctx, "s", events(t, 4, 2)...))
	_, got, err = s.Load(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, events(t, 0, 6), got)
	assertWellFormed(t, path, 6)
}

func TestTornTailBehindAnOpenStore(t *testing.T) {
	s := newStore(t, t.TempDir())
	require.NoError(t, s.Create(ctx, header("s")))
	require.NoError(t, s.Append(ctx, "s", events(t, 0, 3)...))

	// Another process appended one event and crashed halfway through the next.
	line, err := json.Marshal(events(t, 3, 1)[0])
	require.NoError(t, err)
	f, err := os.OpenFile(eventsPath(s, "s"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(append(line, "\n{\"type\":\"assistant/ch"...))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	_, got, err := s.Load(ctx, "s")
	require.NoError(t, err)
	assert.Len(t, got, 4)
	require.ErrorIs(t, s.Append(ctx, "s", events(t, 3, 1)...), session.ErrSeqConflict)
	require.NoError(t, s.Append(ctx, "s", events(t, 4, 1)...))
	assertWellFormed(t, eventsPath(s, "s"), 5)
}

func TestCorruptLineFailsLoad(t *testing.T) {
	s := newStore(t, t.TempDir())
	require.NoError(t, s.Create(ctx, header("s")))
	require.NoError(t, s.Append(ctx, "s", events(t, 0, 2)...))
	f, err := os.OpenFile(eventsPath(s, "s"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("not json\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	_, _, err = s.Load(ctx, "s")
	require.ErrorIs(t, err, session.ErrCorrupt)
	require.ErrorIs(t, s.Append(ctx, "s", events(t, 2, 1)...), session.ErrCorrupt)
}

// assertWellFormed checks that the file holds exactly n complete, dense lines.
func assertWellFormed(t *testing.T, path string, n int) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.HasSuffix(raw, []byte("\n")))
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	require.Len(t, lines, n)
	for i, line := range lines {
		var e session.Event
		require.NoError(t, json.Unmarshal(line, &e), "line %d", i)
		require.Equal(t, int64(i), e.Seq)
	}
}

func TestLoadWhileAppendingSeesWholeEvents(t *testing.T) {
	s := newStore(t, t.TempDir())
	require.NoError(t, s.Create(ctx, header("s")))
	const total = 300
	want := events(t, 0, total)
	for i := range want {
		// Large events make a torn read likely if Load did not exclude writers.
		big, err := json.Marshal(session.Chunk{Type: session.ChunkTextDelta, Index: i, Text: string(bytes.Repeat([]byte{'x'}, 4096))})
		require.NoError(t, err)
		want[i].Data = big
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := 0; i < total; {
			n := min(1+i%5, total-i)
			if !assert.NoError(t, s.Append(ctx, "s", want[i:i+n]...)) {
				return
			}
			i += n
		}
	})
	reader := newStore(t, s.Root())
	for range 2 {
		wg.Go(func() {
			seen := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				_, got, err := reader.Load(ctx, "s")
				if !assert.NoError(t, err) {
					return
				}
				if !assert.GreaterOrEqual(t, len(got), seen) {
					return
				}
				if len(got) > 0 && !assert.Equal(t, want[:len(got)], got) {
					return
				}
				seen = len(got)
			}
		})
	}
	wg.Wait()
	_, got, err := s.Load(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestSubscribe(t *testing.T) {
	s := newStore(t, t.TempDir())
	require.NoError(t, s.Create(ctx, header("s")))
	require.NoError(t, s.Create(ctx, header("other")))

	var all, firstThree []session.Event
	stopAll := s.Subscribe("s", func(e session.Event) { all = append(all, e) })
	var stopSelf func()
	stopSelf = s.Subscribe("s", func(e session.Event) {
		firstThree = append(firstThree, e)
		if len(firstThree) == 3 {
			stopSelf() // from inside the callback
		}
	})
	var others []session.Event
	defer s.Subscribe("other", func(e session.Event) { others = append(others, e) })()

	require.NoError(t, s.Append(ctx, "s", events(t, 0, 2)...))
	require.Error(t, s.Append(ctx, "s", events(t, 5, 1)...))
	require.NoError(t, s.Append(ctx, "s", events(t, 2, 3)...))
	stopAll()
	stopAll()
	require.NoError(t, s.Append(ctx, "s", events(t, 5, 1)...))

	assert.Equal(t, events(t, 0, 5), all, "exactly the appended events, in order")
	assert.Equal(t, events(t, 0, 3), firstThree)
	assert.Empty(t, others)
}

func TestSubscribersSeeSeqOrderUnderConcurrentAppends(t *testing.T) {
	s := newStore(t, t.TempDir())
	require.NoError(t, s.Create(ctx, header("s")))
	var seen []int64
	defer s.Subscribe("s", func(e session.Event) { seen = append(seen, e.Seq) })()

	// Writers race for each seq; exactly one wins each.
	const total = 200
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { appendUntil(t, s, "s", total) })
	}
	wg.Wait()
	require.Len(t, seen, total)
	for i, seq := range seen {
		require.Equal(t, int64(i), seq)
	}
}

// appendUntil appends single events, re-reading the log after each conflict, until it holds
// total events.
func appendUntil(t *testing.T, s *filestore.Store, id string, total int) {
	next := 0
	for next < total {
		err := s.Append(ctx, id, events(t, next, 1)...)
		if err == nil {
			next++
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

func TestTwoStoresOnOneRoot(t *testing.T) {
	root := t.TempDir()
	a, b := newStore(t, root), newStore(t, root)
	require.NoError(t, a.Create(ctx, header("s")))
	require.NoError(t, a.Append(ctx, "s", events(t, 0, 3)...))

	require.NoError(t, b.Append(ctx, "s", events(t, 3, 2)...), "a fresh store continues the seq")
	require.ErrorIs(t, a.Append(ctx, "s", events(t, 3, 1)...), session.ErrSeqConflict,
		"the first store sees what the second appended behind its back")
	require.NoError(t, a.Append(ctx, "s", events(t, 5, 1)...))

	_, got, err := b.Load(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, events(t, 0, 6), got)
}

func TestTwoStoresCannotInterleave(t *testing.T) {
	root := t.TempDir()
	a, b := newStore(t, root), newStore(t, root)
	require.NoError(t, a.Create(ctx, header("s")))
	const total = 200
	var wg sync.WaitGroup
	for _, s := range []*filestore.Store{a, b, a, b} {
		wg.Go(func() { appendUntil(t, s, "s", total) })
	}
	wg.Wait()
	_, got, err := a.Load(ctx, "s")
	require.NoError(t, err)
	assert.Len(t, got, total)
	assertWellFormed(t, eventsPath(a, "s"), total)
}

func TestRemove(t *testing.T) {
	root := t.TempDir()
	s, other := newStore(t, root), newStore(t, root)
	require.NoError(t, s.Create(ctx, header("s")))
	require.NoError(t, s.Append(ctx, "s", events(t, 0, 3)...))
	require.NoError(t, other.Append(ctx, "s", events(t, 3, 1)...))

	require.NoError(t, s.Remove(ctx, "s"))
	assert.NoDirExists(t, filepath.Join(root, "s"))
	_, _, err := s.Load(ctx, "s")
	require.ErrorIs(t, err, session.ErrNotFound)
	require.ErrorIs(t, other.Append(ctx, "s", events(t, 4, 1)...), session.ErrNotFound,
		"a store holding the removed file open notices")
	require.NoError(t, s.Remove(ctx, "s"), "removing an absent session is fine")

	require.NoError(t, s.Create(ctx, header("s")))
	require.NoError(t, other.Append(ctx, "s", events(t, 0, 1)...), "a new session starts at seq 0")
	require.NoError(t, s.Append(ctx, "s", events(t, 1, 1)...))
	_, got, err := s.Load(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, events(t, 0, 2), got)
}

func TestInvalidIDs(t *testing.T) {
	parent := t.TempDir()
	s := newStore(t, filepath.Join(parent, "root"))
	for _, id := range []string{"", ".", "..", "../escape", "a/b", "/abs", `a\b`, "nul\x00"} {
		h := session.Header{ID: id, Cwd: "/"}
		errs := []error{s.Create(ctx, h), s.Append(ctx, id, events(t, 0, 1)...), s.Sync(ctx, id), s.Remove(ctx, id)}
		_, _, err := s.Load(ctx, id)
		errs = append(errs, err)
		for _, err := range errs {
			require.ErrorIs(t, err, session.ErrInvalidID, "id %q", id)
			assert.Contains(t, err.Error(), fmt.Sprintf("%q", id))
		}
	}
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing written outside the root")
	entries, err = os.ReadDir(s.Root())
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestClose(t *testing.T) {
	s := newStore(t, t.TempDir())
	require.NoError(t, s.Create(ctx, header("s")))
	require.NoError(t, s.Append(ctx, "s", events(t, 0, 2)...))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "idempotent")
	require.ErrorIs(t, s.Append(ctx, "s", events(t, 2, 1)...), session.ErrClosed)
	_, _, err := s.Load(ctx, "s")
	require.ErrorIs(t, err, session.ErrClosed)

	_, got, err := newStore(t, s.Root()).Load(ctx, "s")
	require.NoError(t, err)
	assert.Len(t, got, 2)
}

func TestAppendRejectsUnencodableData(t *testing.T) {
	s := newStore(t, t.TempDir())
	require.NoError(t, s.Create(ctx, header("s")))
	bad := events(t, 0, 2)
	bad[1].Data = json.RawMessage("{not json")
	err := s.Append(ctx, "s", bad...)
	require.Error(t, err)
	assert.False(t, errors.Is(err, session.ErrSeqConflict))
	require.NoError(t, s.Append(ctx, "s", events(t, 0, 1)...), "nothing of the failed batch was written")
}

// openFiles counts this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// A worker touches thousands of sessions over its life: the store must not keep a file (and
// an encode buffer) for each of them.
func TestOpenFilesStayBounded(t *testing.T) {
	s := newStore(t, t.TempDir())
	before := openFiles(t)
	n := 2*filestore.MaxOpenLogs + 10
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		require.NoError(t, s.Create(ctx, header(id)))
		require.NoError(t, s.Append(ctx, id, events(t, 0, 1)...))
	}
	assert.LessOrEqual(t, openFiles(t)-before, filestore.MaxOpenLogs+1)

	// The least recently used logs were closed; using one again reopens it where it was.
	require.NoError(t, s.Append(ctx, "s0", events(t, 1, 1)...))
	require.NoError(t, s.Sync(ctx, "s0"))
	_, got, err := s.Load(ctx, "s0")
	require.NoError(t, err)
	assert.Equal(t, events(t, 0, 2), got)
	err = s.Append(ctx, "s1", events(t, 0, 1)...)
	assert.ErrorIs(t, err, session.ErrSeqConflict, "a reopened log still knows its next seq")
}
