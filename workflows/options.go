package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Timeouts of the activities (docs/temporal.md). Drive and RunSDKChild
// heartbeat at least once a second, so a dead worker is noticed within HeartbeatTimeout and
// a cancel reaches a running child within one heartbeat interval (contract R-72). HeartbeatTimeout
// is three intervals: one late heartbeat does not fail a drive, and a killed worker's drive
// is retried elsewhere HeartbeatTimeout + driveFirstRetry after the kill — on a server whose
// history.timerProcessorMaxTimeShift is below driveFirstRetry (the embedded server's 100 ms).
// A server with the default 1 s shift moves a timer due sooner than that after its timer
// queue's last read to 1 s after it, so there the retry starts HeartbeatTimeout + 1 s after
// the kill (docs/benchmarks.md, "Recovery as the user sees it").
const (
	ShortTimeout     = 30 * time.Second
	DriveTimeout     = 2 * time.Hour
	HeartbeatTimeout = 3 * time.Second
)

// shortOptions are those of CreateRootSession, Publish and ReadResult: seconds of work,
// retried with backoff. WaitForCancellation lets the workflow learn whether a cancelled
// Publish created the child after all.
func shortOptions(summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: ShortTimeout,
		WaitForCancellation: true,
		RetryPolicy:         shortRetry(),
		Summary:             summary,
	}
}

// localOptions are those of CreateRootSession, Publish and ReadResult run as local
// activities: the timeout and retries of shortOptions. A local activity runs in the worker
// that holds the workflow task, with no dispatch by the server, and is recorded as a marker
// that carries the summary; the SDK retries it within the worker while the backoff is short
// and with a workflow timer beyond that.
func localOptions(summary string) workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: ShortTimeout,
		RetryPolicy:         shortRetry(),
		Summary:             summary,
	}
}

func shortRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        30 * time.Second,
		MaximumAttempts:        10,
		NonRetryableErrorTypes: rejectionTypes,
	}
}

// driveFirstRetry is the pause before a drive's first retry. A drive fails retryably when its
// worker died (noticed after HeartbeatTimeout), stopped, or lost its session lease: the retry
// is wanted at once. Further retries back off from it (×2, at most a minute).
const driveFirstRetry = 200 * time.Millisecond

// driveOptions are those of Drive and RunSDKChild: long, heartbeated, and waited for on
// cancellation so the aborted result is there to read. A retried Drive resumes from the
// session store; a retried RunSDKChild starts a new child process, hence fewer attempts.
// scheduleToClose bounds the drive over all its attempts.
func driveOptions(summary string, attempts int32, scheduleToClose time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: scheduleToClose,
		StartToCloseTimeout:    DriveTimeout,
		HeartbeatTimeout:       HeartbeatTimeout,
		WaitForCancellation:    true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        driveFirstRetry,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			MaximumAttempts:        attempts,
			NonRetryableErrorTypes: rejectionTypes,
		},
		Summary: summary,
	}
}
