package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// DriveScheduleToClose bounds a drive (Drive or RunSDKChild) over all its attempts when the
// run has no Timeout: a child that keeps failing or stalling is given up on instead of being
// retried for its attempts × DriveTimeout.
const DriveScheduleToClose = 6 * time.Hour

// deadlineGrace is how long after a run's Timeout the drive's ScheduleToClose ends it, in
// case the timer's cancel does not reach the drive: the cancel normally ends it first, with
// the partial answer.
const deadlineGrace = ShortTimeout

// deadline ends a drive when the run's Timeout passes, the way a cancel of the workflow
// does: the drive's context is cancelled, the child's turn ends aborted, and the result is
// read with its partial answer. The run then completes with the aborted outcome.
type deadline struct {
	// passed says the timer fired, so the drive was cancelled by the deadline.
	passed bool
	stop   workflow.CancelFunc
}

// startDeadline returns the context to run the drive in and its deadline. Without a
// Timeout it is ctx itself and adds no command, so runs without one replay as before. The
// Timeout counts from the workflow's start.
func (r *run) startDeadline(ctx workflow.Context) (workflow.Context, *deadline) {
	d := &deadline{stop: func() {}}
	if r.in.Timeout <= 0 {
		return ctx, d
	}
	driveCtx, cancelDrive := workflow.WithCancel(ctx)
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	d.stop = cancelTimer
	left := time.Duration(r.in.Timeout) - workflow.Now(ctx).Sub(workflow.GetInfo(ctx).WorkflowStartTime)
	if left < time.Millisecond {
		left = time.Millisecond
	}
	timer := workflow.NewTimer(timerCtx, left)
	workflow.Go(ctx, func(gctx workflow.Context) {
		if timer.Get(gctx, nil) == nil {
			d.passed = true
			cancelDrive()
		}
	})
	return driveCtx, d
}

// scheduleToClose is the ScheduleToCloseTimeout of the run's drive.
func (r *run) scheduleToClose() time.Duration {
	if r.in.Timeout > 0 {
		return time.Duration(r.in.Timeout) + deadlineGrace
	}
	return DriveScheduleToClose
}
