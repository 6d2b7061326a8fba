package subflow

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/workflows"
)

// CleanupOptions configures a retention cleanup run now (RunCleanup).
type CleanupOptions struct {
	// TaskQueue is the queue whose workers' store is cleaned; "" means workflows.TaskQueue.
	TaskQueue string
	// OlderThan, when positive, replaces the retention (workflows.CleanupInput.OlderThan).
	OlderThan time.Duration
	// DryRun removes nothing and reports what would go.
	DryRun bool
}

// CleanupScheduleOptions configures the Schedule that runs the retention cleanup.
type CleanupScheduleOptions struct {
	// TaskQueue is the queue whose workers' store is cleaned; "" means workflows.TaskQueue.
	TaskQueue string
	// Every is the interval between cleanups; it must be positive.
	Every time.Duration
	// Retention, when positive, is what each cleanup keeps instead of the namespace's
	// retention (workflows.CleanupInput.OlderThan).
	Retention time.Duration
}

// CleanupScheduleID is the id of the cleanup Schedule of taskQueue ("" for
// workflows.TaskQueue): workflows.CleanupScheduleID, suffixed by the queue unless it is the
// default one.
func CleanupScheduleID(taskQueue string) string {
	if taskQueue == "" || taskQueue == workflows.TaskQueue {
		return workflows.CleanupScheduleID
	}
	return workflows.CleanupScheduleID + "-" + taskQueue
}

// hidden keeps subflow's own workflows out of the default workflow lists (workflows.HiddenDivision).
var hidden = temporal.NewSearchAttributes(workflows.HiddenDivisionKey.ValueSet(workflows.HiddenDivision))

// EnsureCleanupSchedule creates the cleanup Schedule of opts.TaskQueue, or updates the
// interval and retention of the one that exists, so the last worker started with the flags
// sets them. The Schedule skips a cleanup while the previous one still runs, so at most one
// runs at a time for the queue, whichever workers serve it.
func EnsureCleanupSchedule(ctx context.Context, c tclient.Client, opts CleanupScheduleOptions) error {
	if opts.Every <= 0 {
		return fmt.Errorf("subflow: cleanup schedule: interval %v must be positive", opts.Every)
	}
	queue := opts.TaskQueue
	if queue == "" {
		queue = workflows.TaskQueue
	}
	id := CleanupScheduleID(queue)
	spec := tclient.ScheduleSpec{Intervals: []tclient.ScheduleIntervalSpec{{Every: opts.Every, Offset: cleanupOffset(id, opts.Every)}}}
	action := &tclient.ScheduleWorkflowAction{
		ID:                    id,
		Workflow:              workflows.CleanupWorkflowName,
		Args:                  []any{workflows.CleanupInput{OlderThan: opts.Retention}},
		TaskQueue:             queue,
		TypedSearchAttributes: hidden,
		StaticSummary:         "subflow retention cleanup",
	}
	_, err := c.ScheduleClient().Create(ctx, tclient.ScheduleOptions{
		ID: id, Spec: spec, Action: action, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
	})
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		if err != nil {
			return fmt.Errorf("subflow: create cleanup schedule %s: %w", id, err)
		}
		return nil
	}
	err = c.ScheduleClient().GetHandle(ctx, id).Update(ctx, tclient.ScheduleUpdateOptions{
		DoUpdate: func(in tclient.ScheduleUpdateInput) (*tclient.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec, s.Action = &spec, action
			if s.Policy == nil {
				s.Policy = &tclient.SchedulePolicies{}
			}
			s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
			return &tclient.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("subflow: update cleanup schedule %s: %w", id, err)
	}
	return nil
}

// cleanupOffset is where in each interval the schedule id's cleanup fires: a whole number of
// seconds below every, fixed by the id. An interval spec counts from the Unix epoch, so
// without an offset every queue's hourly cleanup would hit the store at the same full hour.
func cleanupOffset(id string, every time.Duration) time.Duration {
	secs := uint64(every / time.Second)
	if secs < 2 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64()%secs) * time.Second
}

// ErrCleanupRunning is returned by RunCleanup while another cleanup run now is under way.
var ErrCleanupRunning = errors.New("a cleanup started now is still running")

// RunCleanup runs one retention cleanup now, through Temporal (a worker of opts.TaskQueue
// does it; the caller needs no store access), and returns what it removed or, with
// opts.DryRun, would remove. One such run at a time per queue: its workflow id is
// workflows.CleanupManualWorkflowID (suffixed like CleanupScheduleID), hidden from the
// default workflow list like the scheduled ones.
func RunCleanup(ctx context.Context, c tclient.Client, opts CleanupOptions) (workflows.CleanupResult, error) {
	var res workflows.CleanupResult
	queue := opts.TaskQueue
	if queue == "" {
		queue = workflows.TaskQueue
	}
	id := workflows.CleanupManualWorkflowID + CleanupScheduleID(queue)[len(workflows.CleanupScheduleID):]
	run, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:    hidden,
		StaticSummary:            "subflow retention cleanup, run now",
	}, workflows.CleanupWorkflowName, workflows.CleanupInput{OlderThan: opts.OlderThan, DryRun: opts.DryRun})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return res, fmt.Errorf("subflow: cleanup %s: %w", id, ErrCleanupRunning)
	}
	if err != nil {
		return res, fmt.Errorf("subflow: cleanup %s: %w", id, err)
	}
	if err := run.Get(ctx, &res); err != nil {
		return res, fmt.Errorf("subflow: cleanup %s: %w", id, err)
	}
	return res, nil
}
