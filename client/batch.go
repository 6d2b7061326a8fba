package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/workflows"
)

// batchResultFetchers is how many results BatchResults reads at once.
const batchResultFetchers = 16

// BatchSummaryOf is a batch's summary: its result when it ended, else its progress.
func BatchSummaryOf(ctx context.Context, c tclient.Client, id string) (workflows.BatchSummary, error) {
	var sum workflows.BatchSummary
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return sum, err
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryProgress)
		if err != nil {
			return sum, err
		}
		return sum, v.Get(&sum)
	}
	err = c.GetWorkflow(ctx, id, "").Get(ctx, &sum)
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		err = canceled.Details(&sum)
	}
	return sum, err
}

// listedChild is a child of a batch as visibility lists it.
type listedChild struct {
	index     int
	execution *commonpb.WorkflowExecution
	start     int64 // ms
	close     int64 // ms; 0 while running
	taskQueue string
}

// batchChildren lists the StartSubagent runs of batch id (visibility: SubagentBatch = id),
// with their task numbers from the memo.
func batchChildren(ctx context.Context, c tclient.Client, id string) ([]listedChild, error) {
	query := fmt.Sprintf("SubagentBatch = %q AND WorkflowType = %q", id, workflows.WorkflowName)
	var children []listedChild
	var token []byte
	dc := converter.GetDefaultDataConverter()
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return nil, fmt.Errorf("list runs of batch %s: %w", id, err)
		}
		for _, info := range resp.GetExecutions() {
			p := info.GetMemo().GetFields()[workflows.MemoBatchIndex]
			var n int
			if p == nil || dc.FromPayload(p, &n) != nil {
				continue // not started by a Batch
			}
			ch := listedChild{index: n, execution: info.GetExecution(), start: info.GetStartTime().AsTime().UnixMilli(), taskQueue: info.GetTaskQueue()}
			if info.GetCloseTime() != nil && info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				ch.close = info.GetCloseTime().AsTime().UnixMilli()
			}
			children = append(children, ch)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return children, nil
}

// BatchResults reads the result of every finished task of batch id, ordered by task number:
// one per child run that closed, plus the tasks that could not start (from the batch's
// summary). A result stored by reference is read back in full (ResolveOutcome).
func BatchResults(ctx context.Context, c tclient.Client, id string) ([]workflows.BatchResult, error) {
	sum, err := BatchSummaryOf(ctx, c, id)
	if err != nil {
		return nil, err
	}
	children, err := batchChildren(ctx, c, id)
	if err != nil {
		return nil, err
	}
	results := slices.Clone(sum.StartErrors)
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, batchResultFetchers)
	var wg sync.WaitGroup
	for _, ch := range children {
		if ch.close == 0 {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := childResult(ctx, c, ch)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			results = append(results, r)
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	slices.SortFunc(results, func(a, b workflows.BatchResult) int { return a.Index - b.Index })
	return results, nil
}

// childResult reads the result of a closed batch child.
func childResult(ctx context.Context, c tclient.Client, ch listedChild) (workflows.BatchResult, error) {
	var out workflows.Outcome
	err := c.GetWorkflow(ctx, ch.execution.GetWorkflowId(), ch.execution.GetRunId()).Get(ctx, &out)
	if ctx.Err() != nil {
		return workflows.BatchResult{}, ctx.Err()
	}
	res := workflows.ChildOutcome(out, err)
	if res.Error == "" {
		// A result over one payload (a cancelled child's partial answer too) is stored by
		// reference: read it back through the child's own task queue, whose workers reach
		// the store it was written to.
		if err := ResolveOutcome(ctx, c, ch.taskQueue, &res.Outcome); err != nil {
			return workflows.BatchResult{}, fmt.Errorf("client: result of task %d of %s: %w", ch.index, ch.execution.GetWorkflowId(), err)
		}
	}
	r := workflows.BatchResult{
		Index:      ch.index,
		WorkflowID: ch.execution.GetWorkflowId(),
		ChildID:    res.Outcome.ChildID,
		Error:      res.Error,
		DurationMs: max(ch.close-ch.start, 0),
	}
	if r.Error == "" {
		r.Depth = res.Outcome.Depth
		r.StopReason = res.Outcome.Result.StopReason
		r.Output = session.JoinText(res.Outcome.Result.Output)
		r.Structured = res.Outcome.Result.Structured
		r.InputTokens, r.OutputTokens = res.Outcome.Usage.InputTokens, res.Outcome.Usage.OutputTokens
	}
	in, err := StartInputOf(ctx, c, ch.execution.GetWorkflowId(), ch.execution.GetRunId())
	if err != nil {
		return r, err
	}
	r.Label = in.Request.Label
	return r, nil
}

// StartInputOf reads a run's StartInput from the first event of its history.
func StartInputOf(ctx context.Context, c tclient.Client, workflowID, runID string) (workflows.StartInput, error) {
	var in workflows.StartInput
	ex := &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID}
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("history of %s: empty", ex.GetWorkflowId())
	}
	ev, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("history of %s: %w", ex.GetWorkflowId(), err)
	}
	payloads := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(payloads) == 0 {
		return in, fmt.Errorf("history of %s: no input", ex.GetWorkflowId())
	}
	if err := converter.GetDefaultDataConverter().FromPayload(payloads[0], &in); err != nil {
		return in, fmt.Errorf("input of %s: %w", ex.GetWorkflowId(), err)
	}
	return in, nil
}

// The first tasks of a batch travel inline in its input up to these bounds (SplitInline);
// the others go in pages by workflows.UpdateAddTasks, each under pageMaxBytes (SendTaskPages).
const (
	InlineMaxTasks = 500
	inlineMaxBytes = 512 << 10
	pageMaxBytes   = 1 << 20
)

// SplitInline returns the tasks that travel inline in a BatchInput (up to InlineMaxTasks
// and 512 KiB) and the rest, for SendTaskPages.
func SplitInline(tasks []workflows.Task) (inline, paged []workflows.Task) {
	n, size := 0, 0
	for n < len(tasks) && n < InlineMaxTasks {
		b, err := json.Marshal(tasks[n])
		if err != nil || size+len(b) > inlineMaxBytes {
			break
		}
		size += len(b)
		n++
	}
	return tasks[:n], tasks[n:]
}

// SendTaskPages hands tasks, numbered from first, to the batch in pages by Update. A page that
// fails is sent again (the batch acknowledges a page it already holds), a few times.
func SendTaskPages(ctx context.Context, c tclient.Client, batchID string, first int, tasks []workflows.Task) error {
	for page := 0; len(tasks) > 0; page++ {
		n, size := 0, 0
		for n < len(tasks) && n < workflows.MaxPageTasks {
			b, err := json.Marshal(tasks[n])
			if err != nil {
				return fmt.Errorf("encode task %d: %w", first+n, err)
			}
			if n > 0 && size+len(b) > pageMaxBytes {
				break
			}
			size += len(b)
			n++
		}
		arg := workflows.TaskPage{Page: page, First: first, Tasks: tasks[:n]}
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if err = UpdateBatch(ctx, c, batchID, workflows.UpdateAddTasks, nil, arg); err == nil {
				break
			}
			if ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("hand tasks %d…%d to batch %s: %w", first, first+n-1, batchID, err)
		}
		first += n
		tasks = tasks[n:]
	}
	return nil
}

// UpdateBatch sends update name to the batch and waits for its answer, decoded into sum
// when not nil.
func UpdateBatch(ctx context.Context, c tclient.Client, batchID, name string, sum *workflows.BatchSummary, args ...any) error {
	h, err := c.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID:   batchID,
		UpdateName:   name,
		Args:         args,
		WaitForStage: tclient.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	var s workflows.BatchSummary
	if err := h.Get(ctx, &s); err != nil {
		return err
	}
	if sum != nil {
		*sum = s
	}
	return nil
}
