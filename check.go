package subflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// CheckBatchID refuses, with a *subagent.ValidationError of rule workflows.RuleBatchIDUsed,
// a batch id an earlier batch already used: the child ids of a batch are derived from its
// id, so a second batch under it would find the first one's children instead of running its
// own. The message names the earlier batch, how and when it ended, and `starter batch
// retry`, which runs a batch's tasks again under a new id. An id no workflow has passes.
func CheckBatchID(ctx context.Context, c tclient.Client, id string) error {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("subflow: check batch id %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return subagent.Rejectf(workflows.RuleBatchIDUsed, "batch %q is running (started %s): follow it with starter batch status %s, or choose another --id",
			id, info.GetStartTime().AsTime().UTC().Format(time.RFC3339), id)
	}
	return subagent.Rejectf(workflows.RuleBatchIDUsed, "batch %q already ran (%s, ended %s): its child ids are taken; run its tasks again with starter batch retry %s, or choose another --id",
		id, statusName(info.GetStatus()), info.GetCloseTime().AsTime().UTC().Format(time.RFC3339), id)
}

// statusName is a closed workflow's status as a person reads it ("completed", "failed").
func statusName(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "cancelled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued as new"
	}
	return s.String()
}

// CheckTaskQueue refuses, with a *subagent.ValidationError of rule
// workflows.RuleUnknownTaskQueue, a task queue no worker polls: what starts there waits for
// a worker that may never come (a batch on it cannot even be cancelled, its children never
// run). The server lists the workers that polled within the last minutes; a worker starting
// now is given up to wait to poll.
func CheckTaskQueue(ctx context.Context, c tclient.Client, queue string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		desc, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			return fmt.Errorf("subflow: describe task queue %s: %w", queue, err)
		}
		if len(desc.GetPollers()) > 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return subagent.Rejectf(workflows.RuleUnknownTaskQueue, "no worker polls the task queue %q: start a worker on it, or name the queue the workers serve (--task-queue)", queue)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
