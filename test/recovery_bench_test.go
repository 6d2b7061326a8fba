package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// killRecovery is one worker kill as users see it: a worker process started just before a
// spawn run (so its sticky queue has a recent poll, the case where the server would send the
// run's next workflow task there), SIGKILLed while the run's one model response streams, and
// a replacement started at once. It waits for the run's result, checks that the run
// completed once — its whole answer, one turn in the child's log, the drive retried, one
// completion — and returns the time from the kill to the result minus the redone model call
// (answer: the script's delay, which the retry streams again from its start).
func killRecovery(t testing.TB, f *faultEnv, answer time.Duration) time.Duration {
	t.Helper()
	store := f.openStore()
	dir := t.TempDir()
	text := strings.Repeat("recovered answer ", 20)
	path := script(t, dir, fmt.Sprintf(`{"text": %q, "chunks": 40, "delayMs": %d}`, text, answer.Milliseconds()))
	w1 := f.startWorker()
	pub, run := f.start(rootInput(subagent.ProviderSpawn, dir, path, "answer slowly"))
	pendingActivity(t, f.c, run, workflows.ActivityDrive, func(_ enumsState, p workflows.Progress) bool {
		return p.Tail != ""
	})
	w1.kill()
	killed := time.Now()
	w2 := f.startWorker()
	out, cancelled := outcome(t, run)
	took := time.Since(killed) - answer
	w2.kill()

	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, text, session.JoinText(out.Result.Output), "the whole answer, once")
	tr := checkTranscript(t, store, pub.ChildID)
	assert.Equal(t, session.EndCompleted, tr.end.Kind)
	assert.Len(t, tr.messages, 1, "one assistant message")
	events := history(t, f.c, run)
	attempts, _ := activityAttempts(events)
	assert.Equal(t, int32(2), attempts[workflows.ActivityDrive], "the drive ran twice: killed, then retried")
	completions := 0
	for _, ev := range events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
			completions++
		}
	}
	assert.Equal(t, 1, completions, "the run completed once")
	t.Logf("kill → retried drive started %v; drive completed → next workflow task started %v; result less the redone call %v",
		retryStarted(events).Sub(killed).Round(time.Millisecond), taskAfterDrive(events).Round(time.Millisecond), took.Round(time.Millisecond))
	return took
}

// retryStarted is when the server recorded the last start of the run's drive (the retry's).
func retryStarted(events []*historypb.HistoryEvent) time.Time {
	var at time.Time
	for _, ev := range events {
		if ev.GetActivityTaskStartedEventAttributes() != nil {
			at = ev.GetEventTime().AsTime()
		}
	}
	return at
}

// taskAfterDrive is the time from the drive's completion to the start of the workflow task
// that follows it: how long that task waited, on the sticky queue or the normal one.
func taskAfterDrive(events []*historypb.HistoryEvent) time.Duration {
	var completed time.Time
	for _, ev := range events {
		switch {
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			completed = ev.GetEventTime().AsTime()
		case ev.GetWorkflowTaskStartedEventAttributes() != nil && !completed.IsZero():
			return ev.GetEventTime().AsTime().Sub(completed)
		}
	}
	return 0
}

// TestWorkerKillsEachRunCompletesOnce kills a run's worker mid-drive five times in a row on
// each of two environments at once (a task queue, store and workers of their own), a
// replacement started at once each time: every run completes once, with its whole answer.
// The answer streams for 3 s, so that a heartbeat carrying part of it reaches the server
// before the drive ends, however the heartbeats fall on a loaded machine. Ten kills in a row
// on one environment took 75 s, the longest of the package's parallel tests, which then ran
// on alone after the others were done.
func TestWorkerKillsEachRunCompletesOnce(t *testing.T) {
	t.Parallel()
	for n := range 2 {
		t.Run(fmt.Sprintf("env%d", n+1), func(t *testing.T) {
			t.Parallel()
			f := newFaultEnv(t, "")
			for i := range 5 {
				took := killRecovery(t, f, 3*time.Second)
				t.Logf("kill %d: kill → result, less the redone model call: %v", i+1, took.Round(time.Millisecond))
			}
		})
	}
}

// BenchmarkWorkerKillRecovery measures recovery as the user sees it: from the SIGKILL of the
// worker driving a spawn run (right after a heartbeat reached the server, the worst phase)
// to the run's result at the client, less the 3 s model call the retried drive streams
// again. The replacement worker is started right after the kill. Run with -benchtime=Nx,
// N ≥ 10; it reports p50-ms, p99-ms and max-ms over the N kills.
func BenchmarkWorkerKillRecovery(b *testing.B) {
	f := newFaultEnv(b, "")
	var took []time.Duration
	for b.Loop() {
		took = append(took, killRecovery(b, f, 3*time.Second))
	}
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[(len(took)*99+99)/100-1]), "p99-ms")
	b.ReportMetric(ms(took[len(took)-1]), "max-ms")
	b.Logf("kill → result less the redone model call, sorted: %v", took)
}
