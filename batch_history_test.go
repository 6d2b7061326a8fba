package subflow

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/subflow-dev/subflow/workflows"
)

// events is a run's history as a tclient.HistoryEventIterator; err, when set, is returned
// after the events.
type events struct {
	list []*historypb.HistoryEvent
	err  error
}

func (e *events) HasNext() bool { return len(e.list) > 0 || e.err != nil }

func (e *events) Next() (*historypb.HistoryEvent, error) {
	if len(e.list) == 0 {
		err := e.err
		e.err = nil
		return nil, err
	}
	ev := e.list[0]
	e.list = e.list[1:]
	return ev, nil
}

// runHistory builds the events of one run of a batch.
type runHistory struct {
	t    *testing.T
	list []*historypb.HistoryEvent
}

func (r *runHistory) add(ev *historypb.HistoryEvent) {
	ev.EventId = int64(len(r.list) + 1)
	r.list = append(r.list, ev)
}

// start adds the start of task n's child and returns its initiated event id.
func (r *runHistory) start(n int) int64 {
	dc := converter.GetDefaultDataConverter()
	memo, err := dc.ToPayload(n)
	require.NoError(r.t, err)
	in := workflows.StartInput{}
	in.Request.Label = fmt.Sprintf("label %d", n)
	input, err := dc.ToPayloads(in)
	require.NoError(r.t, err)
	r.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
		Attributes: &historypb.HistoryEvent_StartChildWorkflowExecutionInitiatedEventAttributes{
			StartChildWorkflowExecutionInitiatedEventAttributes: &historypb.StartChildWorkflowExecutionInitiatedEventAttributes{
				WorkflowId: childExecution(n).GetWorkflowId(), Input: input,
				Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{workflows.MemoBatchIndex: memo}}}}})
	return int64(len(r.list))
}

// complete adds the completion of the child initiated at id, task n's, with output.
func (r *runHistory) complete(id int64, n int, output string) {
	result, err := converter.GetDefaultDataConverter().ToPayloads(workflows.Outcome{EndMessage: output})
	require.NoError(r.t, err)
	r.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
		Attributes: &historypb.HistoryEvent_ChildWorkflowExecutionCompletedEventAttributes{
			ChildWorkflowExecutionCompletedEventAttributes: &historypb.ChildWorkflowExecutionCompletedEventAttributes{
				InitiatedEventId: id, WorkflowExecution: childExecution(n), Result: result}}})
}

// fail adds the failure of the child initiated at id, task n's.
func (r *runHistory) fail(id int64, n int) {
	r.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
		Attributes: &historypb.HistoryEvent_ChildWorkflowExecutionFailedEventAttributes{
			ChildWorkflowExecutionFailedEventAttributes: &historypb.ChildWorkflowExecutionFailedEventAttributes{
				InitiatedEventId: id, WorkflowExecution: childExecution(n)}}})
}

// continueAs adds the run's continue-as-new to run.
func (r *runHistory) continueAs(run string) {
	r.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionContinuedAsNewEventAttributes{
			WorkflowExecutionContinuedAsNewEventAttributes: &historypb.WorkflowExecutionContinuedAsNewEventAttributes{NewExecutionRunId: run}}})
}

func childExecution(n int) *commonpb.WorkflowExecution {
	return &commonpb.WorkflowExecution{WorkflowId: workflows.BatchChildWorkflowID("b", n), RunId: fmt.Sprintf("run-%d", n)}
}

// historyOf is a batchHistory of batch "b" whose runs are runs, by run id, the first "r1";
// reads counts the runs opened.
func historyOf(runs map[string]*runHistory, errs map[string]error, reads *int) *batchHistory {
	h := newBatchHistory(nil, "default", "b")
	h.first = func(context.Context) (string, error) { return "r1", nil }
	h.events = func(_ context.Context, batch, run string) tclient.HistoryEventIterator {
		*reads++
		return &events{list: runs[run].list, err: errs[run]}
	}
	return h
}

// output is the output of a held result, "" when there is none.
func output(t *testing.T, r heldResult) string {
	if r.result == nil {
		return ""
	}
	var out workflows.Outcome
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(r.result, &out))
	return out.EndMessage
}

// TestBatchHistoryGivesCompletedChildren: the results of children that completed in the run
// that started them are read along the continue-as-new chain, in task order whatever order
// they ended in, with their labels; a child handed to the next run, one that failed, and one
// whose run is not the one visibility listed give no result, for the caller to read from the
// child's run.
func TestBatchHistoryGivesCompletedChildren(t *testing.T) {
	r1, r2 := &runHistory{t: t}, &runHistory{t: t}
	s0, s1, s2 := r1.start(0), r1.start(1), r1.start(2)
	r1.start(3)
	r1.complete(s1, 1, "one")
	r1.complete(s0, 0, "zero")
	r1.fail(s2, 2)
	r1.continueAs("r2") // task 3 is handed over: the next run awaits it, no event of a child
	s4, s5, s6 := r2.start(4), r2.start(5), r2.start(6)
	r2.complete(s6, 6, "six")
	r2.complete(s5, 5, "five")
	r2.complete(s4, 4, "four")
	reads := 0
	h := historyOf(map[string]*runHistory{"r1": r1, "r2": r2}, nil, &reads)
	ctx := context.Background()

	got := h.take(ctx, 0, childExecution(0))
	assert.Equal(t, "zero", output(t, got))
	assert.Equal(t, "label 0", got.label)
	assert.Equal(t, "one", output(t, h.take(ctx, 1, childExecution(1))), "held while task 0 was read")
	assert.Nil(t, h.take(ctx, 2, childExecution(2)).result, "a failed child")
	assert.Nil(t, h.take(ctx, 3, childExecution(3)).result, "a child handed to the next run")
	assert.Equal(t, 1, reads, "no run read ahead for a child the history saw end elsewhere")
	got = h.take(ctx, 4, childExecution(4))
	assert.Equal(t, "four", output(t, got), "in the next run, after tasks that ended before it")
	assert.Equal(t, "label 4", got.label)
	other := childExecution(5)
	other.RunId = "run-listed"
	assert.Nil(t, h.take(ctx, 5, other).result, "not the run visibility listed")
	assert.Equal(t, "six", output(t, h.take(ctx, 6, childExecution(6))))
	assert.Nil(t, h.take(ctx, 7, childExecution(7)).result, "a task the history never started")
	assert.Equal(t, 2, reads, "each run read once")
	assert.True(t, h.done)
	assert.Empty(t, h.held)
	assert.Zero(t, h.bytes)
}

// TestBatchHistoryBoundsWhatItHolds: a child that ends after heldResultsMax later ones is
// not waited for, the later ones are still given, and nothing behind the task asked for is
// kept; a history that cannot be read gives what it read before the error.
func TestBatchHistoryBoundsWhatItHolds(t *testing.T) {
	r1 := &runHistory{t: t}
	first := r1.start(0)
	ids := map[int]int64{}
	for n := 1; n <= heldResultsMax+1; n++ {
		ids[n] = r1.start(n)
	}
	for n := 1; n <= heldResultsMax+1; n++ {
		r1.complete(ids[n], n, fmt.Sprint(n))
	}
	r1.complete(first, 0, "late")
	reads := 0
	h := historyOf(map[string]*runHistory{"r1": r1}, nil, &reads)
	ctx := context.Background()
	assert.Nil(t, h.take(ctx, 0, childExecution(0)).result, "task 0 ends after more than the bound")
	assert.Len(t, h.held, heldResultsMax)
	for n := 1; n <= heldResultsMax+1; n++ {
		require.Equal(t, fmt.Sprint(n), output(t, h.take(ctx, n, childExecution(n))), "task %d", n)
	}
	assert.Empty(t, h.held, "task 0's late result is behind the tasks asked for")

	r1 = &runHistory{t: t}
	s0, s1 := r1.start(0), r1.start(1)
	r1.complete(s0, 0, "zero")
	r1.complete(s1, 1, "one")
	r1.list = r1.list[:3]
	h = historyOf(map[string]*runHistory{"r1": r1}, map[string]error{"r1": errors.New("unavailable")}, &reads)
	assert.Equal(t, "zero", output(t, h.take(ctx, 0, childExecution(0))))
	assert.Nil(t, h.take(ctx, 1, childExecution(1)).result, "after the error, read from the child's run")
	assert.True(t, h.done)
}
