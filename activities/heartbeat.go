package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// logger returns the logger of one activity call: every line carries the workflow id, run
// id, activity type, attempt and child id.
func (a *Activities) logger(ctx context.Context, childID string) *zap.Logger {
	info := activity.GetInfo(ctx)
	return a.log.With(
		zap.String("workflowId", info.WorkflowExecution.ID),
		zap.String("runId", info.WorkflowExecution.RunID),
		zap.String("activity", info.ActivityType.Name),
		zap.Int32("attempt", info.Attempt),
		zap.String("childId", childID),
	)
}

// progress holds the latest progress of a running drive, written by the driver's goroutines
// and read by the heartbeat ticker.
type progress struct {
	mu sync.Mutex
	p  workflows.Progress
	// wait, when set, is why the drive waits (a rate limit): the heartbeat shows it as the
	// phase.
	wait string
}

// setWait records why the drive waits; "" when it goes on.
func (p *progress) setWait(note string) {
	p.mu.Lock()
	p.wait = note
	p.mu.Unlock()
}

func (p *progress) set(v workflows.Progress) {
	v.Tail = subagent.Tail(v.Tail)
	p.mu.Lock()
	p.p = v
	p.mu.Unlock()
}

func (p *progress) get() workflows.Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.p
	if p.wait != "" {
		v.Phase = p.wait
	}
	return v
}

// startHeartbeat records current() every interval until the returned function is called;
// that function returns once the heartbeats stopped. The first beat comes one interval in,
// not at once: a drive that ends within the interval sends none, and each heartbeat is a
// write of the activity's state on the server (docs/benchmarks.md, "Cost per task"). Neither
// guarantee needs it sooner: a cancel reaches the drive with the response to a heartbeat
// within one interval either way (contract R-72), and the heartbeat timeout counts from the
// activity's start until the first beat.
func (a *Activities) startHeartbeat(ctx context.Context, current func() workflows.Progress) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	// Each detail carries its human line, which the Temporal UI shows on the pending activity.
	beat := func() {
		p := current()
		p.Summary = p.String()
		activity.RecordHeartbeat(ctx, p)
	}
	wg.Go(func() {
		t := time.NewTicker(a.interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				beat()
			case <-done:
				return
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
