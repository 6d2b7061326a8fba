package subflow

import (
	"context"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/subflow-dev/subflow/workflows"
)

// heldResultsMax and heldBytesMax bound the results a batchHistory holds ahead of the task
// being emitted. A batch's children end about in task order, within a window about its
// concurrency wide; a child that ends long after those behind it is read from its own run
// rather than holding every result that ended meanwhile.
const (
	heldResultsMax = 1024
	heldBytesMax   = 8 << 20
)

// eventSource gives the events of one run of a batch in order, as
// tclient.Client.GetWorkflowHistory does.
type eventSource func(ctx context.Context, batch, runID string) tclient.HistoryEventIterator

// batchHistory reads the results of a batch's children out of the batch's own history, run
// after run along its continue-as-new chain, in the order they ended: a child that completed
// has its result in the batch's ChildWorkflowExecutionCompleted event, and its task number
// and label in the event that started it (its memo and its input). Read there, the results of
// a few dozen children cost one page of history; read from each child's run, they cost two
// calls per child (its result and its first event), which were most of the time taken to
// read a batch's results back. The batch's history is written by the batch's workflow alone,
// so what it says of a child is the batch's word.
//
// It gives only the results of children that completed in the run that started them; every
// other result (a child awaited across continue-as-new, one cancelled, failed or terminated,
// one that ended after the bounds on what it holds, or any when the history cannot be read)
// the caller reads from the child's own run. Its methods are for one goroutine.
type batchHistory struct {
	id     string
	events eventSource
	// first returns the batch's first run id.
	first func(ctx context.Context) (string, error)

	it      tclient.HistoryEventIterator
	run     string
	done    bool
	next    int                    // the lowest task number still to be taken
	started map[int64]startedChild // by initiated event id, in the run being read
	held    map[int]heldResult
	bytes   int
	// elsewhere are the tasks whose children the history has seen start and not complete
	// in their run: they ended otherwise, or a later run awaited them. Their results are
	// not read ahead for.
	elsewhere map[int]bool
}

// startedChild is a child the run being read started.
type startedChild struct {
	index int
	label string
}

// heldResult is the result of a completed child, read from the batch's history.
type heldResult struct {
	execution *commonpb.WorkflowExecution
	label     string
	result    *commonpb.Payloads
}

// newBatchHistory reads batch id's history through c, whose namespace is namespace.
func newBatchHistory(c tclient.Client, namespace, id string) *batchHistory {
	return &batchHistory{
		id: id,
		events: func(ctx context.Context, batch, runID string) tclient.HistoryEventIterator {
			return &historyPages{ctx: ctx, c: c, namespace: namespace, execution: &commonpb.WorkflowExecution{WorkflowId: batch, RunId: runID}}
		},
		first: func(ctx context.Context) (string, error) {
			desc, err := c.DescribeWorkflowExecution(ctx, id, "")
			return desc.GetWorkflowExecutionInfo().GetFirstRunId(), err
		},
		started:   map[int64]startedChild{},
		held:      map[int]heldResult{},
		elsewhere: map[int]bool{},
	}
}

// take returns the result of task n when the batch's history has it for ex, the run
// visibility listed for the task, else a heldResult without a result. Tasks are taken in
// increasing order: a result for a task below the last one asked for is no longer held.
func (h *batchHistory) take(ctx context.Context, n int, ex *commonpb.WorkflowExecution) heldResult {
	h.next = max(h.next, n)
	for {
		if r, ok := h.held[n]; ok {
			delete(h.held, n)
			h.bytes -= r.result.Size()
			if r.execution.GetWorkflowId() != ex.GetWorkflowId() || r.execution.GetRunId() != ex.GetRunId() {
				return heldResult{}
			}
			return r
		}
		if h.elsewhere[n] {
			delete(h.elsewhere, n)
			return heldResult{}
		}
		if h.done || ctx.Err() != nil || len(h.held) >= heldResultsMax || h.bytes >= heldBytesMax {
			return heldResult{}
		}
		h.read(ctx)
	}
}

// read reads the next event of the batch's history. At any error the history is done and
// the results still to come are read from the children's runs.
func (h *batchHistory) read(ctx context.Context) {
	if h.it == nil {
		if h.run == "" {
			first, err := h.first(ctx)
			if err != nil || first == "" {
				h.done = true
				return
			}
			h.run = first
		}
		h.it = h.events(ctx, h.id, h.run)
		clear(h.started)
	}
	if !h.it.HasNext() {
		// The run closed without continuing as new, or is the one still running.
		h.done = true
		return
	}
	ev, err := h.it.Next()
	if err != nil {
		h.done = true
		return
	}
	h.event(ev)
}

// event takes in one event of the run being read.
func (h *batchHistory) event(ev *historypb.HistoryEvent) {
	dc := converter.GetDefaultDataConverter()
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
		a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes()
		var s startedChild
		p := a.GetMemo().GetFields()[workflows.MemoBatchIndex]
		if p == nil || dc.FromPayload(p, &s.index) != nil {
			return
		}
		var in workflows.StartInput
		if dc.FromPayloads(a.GetInput(), &in) != nil {
			return
		}
		s.label = in.Request.Label
		h.started[ev.GetEventId()] = s
	case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
		a := ev.GetChildWorkflowExecutionCompletedEventAttributes()
		s, ok := h.started[a.GetInitiatedEventId()]
		delete(h.started, a.GetInitiatedEventId())
		if !ok || s.index < h.next {
			return
		}
		if _, dup := h.held[s.index]; dup {
			return
		}
		h.held[s.index] = heldResult{execution: a.GetWorkflowExecution(), label: s.label, result: a.GetResult()}
		h.bytes += a.GetResult().Size()
	case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED:
		h.endedElsewhere(ev.GetStartChildWorkflowExecutionFailedEventAttributes().GetInitiatedEventId())
	case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
		h.endedElsewhere(ev.GetChildWorkflowExecutionFailedEventAttributes().GetInitiatedEventId())
	case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED:
		h.endedElsewhere(ev.GetChildWorkflowExecutionCanceledEventAttributes().GetInitiatedEventId())
	case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT:
		h.endedElsewhere(ev.GetChildWorkflowExecutionTimedOutEventAttributes().GetInitiatedEventId())
	case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED:
		h.endedElsewhere(ev.GetChildWorkflowExecutionTerminatedEventAttributes().GetInitiatedEventId())
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		// The children still running are handed to the next run.
		for id := range h.started {
			h.endedElsewhere(id)
		}
		h.run = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		h.it = nil
		if h.run == "" {
			h.done = true
		}
	}
}

// endedElsewhere notes that the child initiated at id will not complete in this run's
// history.
func (h *batchHistory) endedElsewhere(id int64) {
	s, ok := h.started[id]
	delete(h.started, id)
	if ok && s.index >= h.next {
		h.elsewhere[s.index] = true
	}
}

// historyPageBatches is how many batches of events (one workflow task's each) a page of a
// batch's history holds. The server's default page is 256 batches, about 2 MB of a batch's
// history with its tasks' inputs and results, which a reader holds twice while decoding it;
// a batch that took its tasks in pages holds up to 160 KB in one batch of events.
const historyPageBatches = 16

// historyPages is a tclient.HistoryEventIterator over a run's history read in pages of
// historyPageBatches (the client's own iterator reads the server's default pages).
type historyPages struct {
	ctx       context.Context
	c         tclient.Client
	namespace string
	execution *commonpb.WorkflowExecution
	token     []byte
	started   bool
	events    []*historypb.HistoryEvent
	err       error
}

func (p *historyPages) HasNext() bool {
	for len(p.events) == 0 && p.err == nil && (!p.started || len(p.token) > 0) {
		p.started = true
		resp, err := p.c.WorkflowService().GetWorkflowExecutionHistory(p.ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace: p.namespace, Execution: p.execution, MaximumPageSize: historyPageBatches, NextPageToken: p.token})
		if err != nil {
			p.err = fmt.Errorf("history of %s run %s: %w", p.execution.GetWorkflowId(), p.execution.GetRunId(), err)
			break
		}
		p.events, p.token = resp.GetHistory().GetEvents(), resp.GetNextPageToken()
	}
	return len(p.events) > 0 || p.err != nil
}

func (p *historyPages) Next() (*historypb.HistoryEvent, error) {
	if !p.HasNext() {
		return nil, fmt.Errorf("history of %s run %s: no more events", p.execution.GetWorkflowId(), p.execution.GetRunId())
	}
	if len(p.events) == 0 {
		err := p.err
		p.err = nil
		return nil, err
	}
	ev := p.events[0]
	p.events[0] = nil // an event read is not kept for the rest of its page
	p.events = p.events[1:]
	return ev, nil
}
