package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/subflow-dev/subflow/harness/session"
)

// BatchStore is a store the way the activities use it: leased and retained.
type BatchStore interface {
	session.Leaser
	session.Retainer
}

// BenchmarkBatchTask asks s, 50 tasks at a time, what one task of a batch of scripted runs
// asks of its session store (counted with strace in docs/benchmarks.md): a root session
// owned, created and loaded; a child session owned, created and loaded, leased, eight fenced
// appends with a sync at the end of the step and of the turn, released and loaded three
// times (four until the ReadResult activity took the log its read of the result loaded).
// It reports tasks/s and a task's p50 and p99, so what a store costs a batch shows without a
// Temporal server. Each benchmark op is one task; the sessions stay in the store.
func BenchmarkBatchTask(b *testing.B, s BatchStore) {
	prefix := fmt.Sprintf("batchtask-%d", time.Now().UnixNano())
	chunks := events(b, 0, 8) // every child's log: built here, where a failure may stop b
	tasks := make(chan int)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		lat []time.Duration
	)
	for range 50 {
		wg.Go(func() {
			for n := range tasks {
				begin := time.Now()
				if err := batchTask(s, fmt.Sprintf("%s-%d", prefix, n), chunks); err != nil {
					b.Error(err)
					continue
				}
				mu.Lock()
				lat = append(lat, time.Since(begin))
				mu.Unlock()
			}
		})
	}
	for n := 0; b.Loop(); n++ {
		tasks <- n
	}
	close(tasks)
	wg.Wait()
	if len(lat) == 0 {
		b.Fatal("no task completed")
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(ms(lat[len(lat)/2]), "task-p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "task-p99-ms")
}

// batchTask is one task of BenchmarkBatchTask; name is unique to it, chunks its child's log.
func batchTask(s BatchStore, name string, chunks []session.Event) error {
	root, child := name+"-root", name+"-child"
	for _, id := range []string{root, child} {
		if err := s.Own(ctx, id, name); err != nil {
			return err
		}
		if err := s.Create(ctx, header(id)); err != nil {
			return err
		}
		if _, _, err := s.Load(ctx, id); err != nil {
			return err
		}
	}
	token, err := s.TryLease(ctx, child, time.Minute)
	if err != nil {
		return err
	}
	for i, e := range chunks {
		if err := s.AppendFenced(ctx, child, token, e); err != nil {
			return err
		}
		if i == 5 || i == 7 {
			if err := s.Sync(ctx, child); err != nil {
				return err
			}
		}
	}
	if err := s.ReleaseLease(ctx, child, token); err != nil {
		return err
	}
	for range 3 {
		if _, _, err := s.Load(ctx, child); err != nil {
			return err
		}
	}
	return nil
}
