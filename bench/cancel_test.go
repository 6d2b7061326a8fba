package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/subagent"
)

// defaultCancels is the number of cancels per sub-benchmark of BenchmarkCancelLatency;
// SUBFLOW_BENCH_CANCELS overrides it.
const defaultCancels = 100

// cancelPipeline is how many runs are started and brought to mid-stream while the previous
// one is cancelled and measured; it only shortens the benchmark. Cancels are never
// concurrent.
const cancelPipeline = 3

// BenchmarkCancelLatency cancels runs mid-stream, one at a time, and measures from the
// CancelWorkflow call to the child's end (contract R-72):
//
//   - inprocess: a spawn run, until its child's turn/end (aborted, cause parent), timed by the
//     event's own timestamp in the worker's session store;
//   - sdk: an sdk run, until its child process is reaped (gone from /proc); exit-* is until it
//     has exited (a zombie or gone).
//
// closed-* is until the workflow's outcome reached the client. Run it once:
//
//	go test -run '^$' -bench CancelLatency -benchtime 1x -timeout 30m ./bench/
func BenchmarkCancelLatency(b *testing.B) {
	n := envCount("SUBFLOW_BENCH_CANCELS", defaultCancels)
	for _, provider := range []string{subagent.ProviderSpawn, subagent.ProviderSDK} {
		name := "inprocess"
		if provider == subagent.ProviderSDK {
			name = "sdk"
		}
		b.Run(fmt.Sprintf("%s-%d", name, n), func(b *testing.B) {
			var lat, exit, closed []time.Duration
			for b.Loop() {
				l, e, c := cancelRuns(b, provider, n)
				lat, exit, closed = append(lat, l...), append(exit, e...), append(closed, c...)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(len(lat)), "cancels")
			reportPercentiles(b, lat, "")
			reportPercentiles(b, exit, "exit-")
			reportPercentiles(b, closed, "closed-")
		})
	}
}

// ready is a run brought to mid-stream, with its sdk child's pid (sdk runs only).
type ready struct {
	r   slowRun
	pid int
	err error
}

// cancelRuns cancels n slow runs of provider, one at a time, and returns the latencies (see
// BenchmarkCancelLatency).
func cancelRuns(b *testing.B, provider string, n int) (lat, exit, closed []time.Duration) {
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Minute)
	defer stop()
	dir := b.TempDir()
	scriptPath := slowScript(b, dir)
	store, err := filestore.New(filepath.Join(env.tmp, "sessions"))
	require.NoError(b, err)
	defer store.Close()

	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	runs := make(chan ready)
	for range cancelPipeline {
		go func() {
			for range jobs {
				rd := prepare(ctx, provider, dir, scriptPath)
				select {
				case runs <- rd:
				case <-ctx.Done():
					return
				}
			}
		}()
	}

	for range n {
		rd := <-runs
		require.NoError(b, rd.err)
		// A cancel reaches a drive with a heartbeat response, and a run is handed over
		// right after the heartbeat that showed it streaming: cancel at a random phase of
		// the heartbeat interval, as a user would.
		time.Sleep(rand.N(activities.DefaultHeartbeatInterval))
		begin := time.Now()
		require.NoError(b, env.c.CancelWorkflow(ctx, rd.r.run.GetID(), rd.r.run.GetRunID()))
		if provider == subagent.ProviderSDK {
			e, l := waitReaped(ctx, b, rd.pid, begin)
			exit, lat = append(exit, e), append(lat, l)
		} else {
			lat = append(lat, waitTurnEnd(ctx, b, store, rd.r.pub.ChildID, begin))
		}
		require.NoError(b, waitCancelled(ctx, rd.r))
		closed = append(closed, time.Since(begin))
	}
	return lat, exit, closed
}

// prepare starts a slow run and waits until it streams; for an sdk run it also finds the
// child process.
func prepare(ctx context.Context, provider, dir, scriptPath string) ready {
	r, err := startSlow(ctx, provider, env.queue, dir, scriptPath)
	if err != nil {
		return ready{err: err}
	}
	if err := waitStreaming(ctx, r); err != nil {
		return ready{err: err}
	}
	if provider != subagent.ProviderSDK {
		return ready{r: r}
	}
	pid := childRuntime(r.dir)
	if pid == 0 {
		return ready{err: fmt.Errorf("run %s streams but has no child process in %s", r.run.GetID(), r.dir)}
	}
	return ready{r: r, pid: pid}
}

// waitTurnEnd polls the child session until its turn ends and returns the time from begin
// to the turn/end event's timestamp, checking that the turn was aborted by the parent. The
// worker runs in this process, so the timestamp is on this clock; polling only finds it.
func waitTurnEnd(ctx context.Context, b *testing.B, store *filestore.Store, childID string, begin time.Time) time.Duration {
	for {
		_, events, err := store.Load(ctx, childID)
		require.NoError(b, err)
		for _, ev := range events {
			if ev.Type != session.TypeTurnEnd {
				continue
			}
			var end session.TurnEndData
			require.NoError(b, ev.Decode(&end))
			require.Equal(b, session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent}, end.Reason)
			return ev.Time.Sub(begin)
		}
		select {
		case <-ctx.Done():
			b.Fatalf("child %s: no turn/end: %v", childID, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitReaped polls /proc/<pid> and returns the times from begin until the process had
// exited (a zombie or gone) and until it was reaped (gone).
func waitReaped(ctx context.Context, b *testing.B, pid int, begin time.Time) (exited, reaped time.Duration) {
	stat := filepath.Join("/proc", strconv.Itoa(pid), "stat")
	for {
		data, err := os.ReadFile(stat)
		if os.IsNotExist(err) {
			if exited == 0 {
				exited = time.Since(begin)
			}
			return exited, time.Since(begin)
		}
		if state, _ := procState(data); state == 'Z' && exited == 0 {
			exited = time.Since(begin)
		}
		select {
		case <-ctx.Done():
			b.Fatalf("sdk child %d never reaped: %v", pid, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}
