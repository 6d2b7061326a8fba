package activities

import (
	"context"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"
)

// stickyResetTimeout bounds the one ResetStickyTaskQueue call of a retried drive.
const stickyResetTimeout = 5 * time.Second

// resetStickiness, in a retried Drive or RunSDKChild (attempt 2 and later), tells the server
// to forget the workflow's sticky task queue, so the workflow task that follows the drive
// goes to the normal queue at once (docs/benchmarks.md, "Recovery as the user sees it").
//
// A drive is retried because its worker died, was cut off or stopped; the workflow's sticky
// queue is most likely that worker's. The server sends the next workflow task to the sticky
// queue while a poll of it began in the last 10 s (matching's sticky-poller window), and a
// task there waits out the sticky schedule-to-start timeout (5 s) before it moves to the
// normal queue: a killed worker's runs would stand still those 5 s after their retried drive
// completed. The cost is one call per retried attempt and, if the sticky worker was alive
// after all, one replay of the workflow's history on whichever worker takes the next task.
// Failing to reset only costs that wait, so an error is logged, never returned.
func (a *Activities) resetStickiness(ctx context.Context, log *zap.Logger) {
	info := activity.GetInfo(ctx)
	if info.Attempt <= 1 {
		return
	}
	c := a.client(ctx)
	if c == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, stickyResetTimeout)
	defer cancel()
	_, err := c.WorkflowService().ResetStickyTaskQueue(rctx, &workflowservice.ResetStickyTaskQueueRequest{
		Namespace: info.WorkflowNamespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: info.WorkflowExecution.ID, RunId: info.WorkflowExecution.RunID},
	})
	if err != nil {
		log.Warn("reset the workflow's sticky task queue", zap.Error(err))
		return
	}
	log.Info("retried attempt: reset the workflow's sticky task queue")
}
