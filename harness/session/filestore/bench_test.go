package filestore_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkAppendSyncEvery10 appends one chunk event per Append and syncs every 10 events,
// like an agent streaming text deltas and syncing at step boundaries.
func BenchmarkAppendSyncEvery10(b *testing.B) {
	s := newStore(b, b.TempDir())
	require.NoError(b, s.Create(ctx, header("s")))
	evs := events(b, 0, 1)
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

// BenchmarkAppendBatch10 appends ten events per Append and syncs after each, like an agent
// recording a step (pgstore has the same benchmark).
func BenchmarkAppendBatch10(b *testing.B) {
	s := newStore(b, b.TempDir())
	require.NoError(b, s.Create(ctx, header("s")))
	evs := events(b, 0, 10)
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

// BenchmarkAppendNoSync measures the store's own cost per single-event Append, without the
// disk flush that dominates BenchmarkAppendSyncEvery10.
func BenchmarkAppendNoSync(b *testing.B) {
	s := newStore(b, b.TempDir())
	require.NoError(b, s.Create(ctx, header("s")))
	evs := events(b, 0, 1)
	n := 0
	for b.Loop() {
		evs[0].Seq = int64(n)
		if err := s.Append(ctx, "s", evs...); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkLoad10k loads a session of 10,000 chunk events.
func BenchmarkLoad10k(b *testing.B) {
	s := newStore(b, b.TempDir())
	require.NoError(b, s.Create(ctx, header("s")))
	require.NoError(b, s.Append(ctx, "s", events(b, 0, 10_000)...))
	for b.Loop() {
		_, got, err := s.Load(ctx, "s")
		if err != nil || len(got) != 10_000 {
			b.Fatal(err, len(got))
		}
	}
}
