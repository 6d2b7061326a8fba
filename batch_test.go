package subflow

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/subflow-dev/subflow/workflows"
)

// TestClosedChildrenKeepEachRun: the compact entries batch results keep give back the run
// visibility listed, whether its workflow id is derived or the task's own, and whatever its
// run id looks like; a run still open, a second run of a task, or a task number outside the
// batch (a memo anyone could write) changes nothing.
func TestClosedChildrenKeepEachRun(t *testing.T) {
	const batch = "batch-1"
	derived := &commonpb.WorkflowExecution{WorkflowId: workflows.BatchChildWorkflowID(batch, 0), RunId: uuid.NewString()}
	own := &commonpb.WorkflowExecution{WorkflowId: "own-task-id", RunId: uuid.NewString()}
	oddRun := &commonpb.WorkflowExecution{WorkflowId: workflows.BatchChildWorkflowID(batch, 2), RunId: "not-a-uuid"}

	cs := newClosedChildren(batch, 4)
	cs.add(listedChild{index: 0, execution: derived, start: 1000, close: 1500, taskQueue: "q"})
	cs.add(listedChild{index: 0, execution: &commonpb.WorkflowExecution{WorkflowId: derived.WorkflowId, RunId: uuid.NewString()}, start: 1, close: 2, taskQueue: "q"})
	cs.add(listedChild{index: 1, execution: own, start: 1000, close: 3000, taskQueue: "host-q"})
	cs.add(listedChild{index: 2, execution: oddRun, start: 2000, close: 1000, taskQueue: "q"})
	cs.add(listedChild{index: 3, execution: &commonpb.WorkflowExecution{WorkflowId: workflows.BatchChildWorkflowID(batch, 3), RunId: uuid.NewString()}, start: 1000, taskQueue: "q"})
	for _, n := range []int{-1, 4, 1 << 40} {
		cs.add(listedChild{index: n, execution: &commonpb.WorkflowExecution{WorkflowId: "stray", RunId: uuid.NewString()}, start: 0, close: 7, taskQueue: "q"})
	}

	assert.Equal(t, 3, cs.count)
	for n, want := range map[int]*commonpb.WorkflowExecution{0: derived, 1: own, 2: oddRun} {
		require.True(t, cs.has(n), "task %d", n)
		assert.Equal(t, want.WorkflowId, cs.execution(n).GetWorkflowId(), "task %d", n)
		assert.Equal(t, want.RunId, cs.execution(n).GetRunId(), "task %d", n)
	}
	assert.False(t, cs.has(3), "a run still open is not a result")
	assert.False(t, cs.has(4))
	assert.False(t, cs.has(-1))
	assert.Len(t, cs.byTask, 3, "the table reaches the highest task listed, not past it")

	// The count of tasks comes from the batch's input, which any client writes: it sizes
	// nothing.
	huge := newClosedChildren(batch, 1<<50)
	assert.Empty(t, huge.byTask)
	huge.add(listedChild{index: 1, execution: own, start: 0, close: 7, taskQueue: "q"})
	assert.Len(t, huge.byTask, 2)
	assert.Equal(t, int64(500), cs.byTask[0].durationMs, "the first closed run of a task is kept")
	assert.Equal(t, int64(0), cs.byTask[2].durationMs, "a close before the start is no negative duration")
	assert.Equal(t, "host-q", cs.byTask[1].taskQueue)
	assert.Nil(t, cs.byTask[0].execution, "a derived workflow id is not stored")
}

// TestChildOfTakesOnlyTheBatchsChildren: a run carrying the batch's search attribute and a
// task number in its memo, as any client can start one, is a child of the batch only when the
// batch's workflow started it.
func TestChildOfTakesOnlyTheBatchsChildren(t *testing.T) {
	const batch = "batch-1"
	index, err := converter.GetDefaultDataConverter().ToPayload(3)
	require.NoError(t, err)
	info := func(parent *commonpb.WorkflowExecution) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{
			Execution:       &commonpb.WorkflowExecution{WorkflowId: workflows.BatchChildWorkflowID(batch, 3), RunId: uuid.NewString()},
			ParentExecution: parent,
			Memo:            &commonpb.Memo{Fields: map[string]*commonpb.Payload{workflows.MemoBatchIndex: index}},
			StartTime:       timestamppb.New(time.UnixMilli(1000)),
			CloseTime:       timestamppb.New(time.UnixMilli(1500)),
			Status:          enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
			TaskQueue:       "q",
		}
	}

	ch, ok := childOf(info(&commonpb.WorkflowExecution{WorkflowId: batch, RunId: uuid.NewString()}), batch)
	require.True(t, ok, "the batch's own child")
	assert.Equal(t, 3, ch.index)
	assert.Equal(t, int64(1500), ch.close)

	for name, parent := range map[string]*commonpb.WorkflowExecution{
		"no parent":       nil,
		"another batch":   {WorkflowId: "batch-2", RunId: uuid.NewString()},
		"a prefix of it":  {WorkflowId: "batch-", RunId: uuid.NewString()},
		"the id extended": {WorkflowId: batch + "x", RunId: uuid.NewString()},
	} {
		_, ok := childOf(info(parent), batch)
		assert.False(t, ok, "%s: a run the batch did not start is none of its tasks", name)
	}
}

// TestRunWaitsNamesTheCause: a batch's run that does not answer its progress query is
// described by what its workflow task is doing: waiting for a worker of its build, or taken by
// one and not completed (a long task on a loaded server is not a missing worker), or none.
func TestRunWaitsNamesTheCause(t *testing.T) {
	scheduled := time.Date(2026, 12, 6, 19, 16, 15, 0, time.UTC)
	started := scheduled.Add(2 * time.Second)
	pinned := &workflowpb.WorkflowExecutionVersioningInfo{Behavior: enumspb.VERSIONING_BEHAVIOR_PINNED,
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: "subflow", BuildId: "b1"}}
	desc := func(pt *workflowpb.PendingWorkflowTaskInfo, vi *workflowpb.WorkflowExecutionVersioningInfo) *workflowservice.DescribeWorkflowExecutionResponse {
		return &workflowservice.DescribeWorkflowExecutionResponse{PendingWorkflowTask: pt,
			WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{VersioningInfo: vi}}
	}
	for _, c := range []struct {
		name string
		desc *workflowservice.DescribeWorkflowExecutionResponse
		want string
	}{
		{"waiting", desc(&workflowpb.PendingWorkflowTaskInfo{State: enumspb.PENDING_WORKFLOW_TASK_STATE_SCHEDULED,
			ScheduledTime: timestamppb.New(scheduled), Attempt: 1}, pinned),
			"its workflow task has waited since 2026-12-06T19:16:15Z for a worker of build subflow:b1 (pinned)"},
		{"taken", desc(&workflowpb.PendingWorkflowTaskInfo{State: enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED,
			ScheduledTime: timestamppb.New(scheduled), StartedTime: timestamppb.New(started), Attempt: 2}, pinned),
			"its workflow task (attempt 2) has run since 2026-12-06T19:16:17Z on a worker of build subflow:b1 (pinned)"},
		{"unversioned", desc(&workflowpb.PendingWorkflowTaskInfo{State: enumspb.PENDING_WORKFLOW_TASK_STATE_SCHEDULED,
			ScheduledTime: timestamppb.New(scheduled)}, nil),
			"its workflow task has waited since 2026-12-06T19:16:15Z for a worker of its build"},
		{"none", desc(nil, pinned), "no workflow task is pending; the query waits for a worker of build subflow:b1 (pinned)"},
	} {
		assert.Equal(t, c.want, runWaits(c.desc), c.name)
	}
}
