package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/storetest"
)

// chunks returns n chunk events numbered from first.
func chunks(b *testing.B, first, n int) []session.Event {
	out := make([]session.Event, n)
	for i := range out {
		e, err := session.NewEvent(session.TypeAssistantChunk, session.AssistantChunkData{
			Turn: 1, Step: 1,
			Chunk: session.Chunk{Type: session.ChunkTextDelta, Index: first + i, Text: fmt.Sprintf("text <%d> & \"more\"\n", first+i)},
		})
		require.NoError(b, err)
		e.Seq = int64(first + i)
		e.Time = time.Unix(0, 0).UTC()
		out[i] = e
	}
	return out
}

// BenchmarkAppendBatch10 appends ten events per Append and syncs after each, like an agent
// recording a step.
func BenchmarkAppendBatch10(b *testing.B) {
	s := open(b, freshSchema(b))
	require.NoError(b, s.Create(ctx, session.Header{ID: "s", Cwd: "/"}))
	evs := chunks(b, 0, 10)
	n := 0
	for b.Loop() {
		for i := range evs {
			evs[i].Seq = int64(n + i)
		}
		if err := s.Append(ctx, "s", evs...); err != nil {
			b.Fatal(err)
		}
		if err := s.Sync(ctx, "s"); err != nil {
			b.Fatal(err)
		}
		n += len(evs)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendSyncEvery10 appends one chunk event per Append and syncs every 10 events, like
// an agent streaming text deltas (the file store's benchmark of the same name).
func BenchmarkAppendSyncEvery10(b *testing.B) {
	s := open(b, freshSchema(b))
	require.NoError(b, s.Create(ctx, session.Header{ID: "s", Cwd: "/"}))
	evs := chunks(b, 0, 1)
	n := 0
	for b.Loop() {
		evs[0].Seq = int64(n)
		if err := s.Append(ctx, "s", evs...); err != nil {
			b.Fatal(err)
		}
		n++
		if n%10 == 0 {
			if err := s.Sync(ctx, "s"); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkLoad10k loads a session of 10,000 chunk events.
func BenchmarkLoad10k(b *testing.B) {
	s := open(b, freshSchema(b))
	require.NoError(b, s.Create(ctx, session.Header{ID: "s", Cwd: "/"}))
	require.NoError(b, s.Append(ctx, "s", chunks(b, 0, 10_000)...))
	for b.Loop() {
		_, got, err := s.Load(ctx, "s")
		if err != nil || len(got) != 10_000 {
			b.Fatal(err, len(got))
		}
	}
}

// BenchmarkBatchTask: see storetest.BenchmarkBatchTask (the file store's benchmark of the same
// name).
func BenchmarkBatchTask(b *testing.B) {
	storetest.BenchmarkBatchTask(b, open(b, freshSchema(b)))
}
