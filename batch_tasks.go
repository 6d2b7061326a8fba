package subflow

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/subflow-dev/subflow/workflows"
)

// BatchTasks returns every task batch id was given, numbered as the batch numbers them, and
// the defaults that complete them: the inline tasks of its first run's input and the pages
// handed over by workflows.UpdateAddTasks, read from the histories of its runs (the stored
// pages are removed when a batch ends, the history keeps them). A task never handed over is
// missing from the map.
func BatchTasks(ctx context.Context, c tclient.Client, id string) (map[int]workflows.Task, workflows.TaskDefaults, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, workflows.TaskDefaults{}, fmt.Errorf("subflow: tasks of batch %s: %w", id, err)
	}
	tasks := map[int]workflows.Task{}
	var defaults workflows.TaskDefaults
	dc := converter.GetDefaultDataConverter()
	runID := desc.GetWorkflowExecutionInfo().GetFirstRunId()
	for first := true; runID != ""; first = false {
		it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, defaults, fmt.Errorf("subflow: history of batch %s run %s: %w", id, runID, err)
			}
			switch {
			case first && ev.GetWorkflowExecutionStartedEventAttributes() != nil:
				var in workflows.BatchInput
				if p := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads(); len(p) > 0 {
					if err := dc.FromPayload(p[0], &in); err != nil {
						return nil, defaults, fmt.Errorf("subflow: input of batch %s: %w", id, err)
					}
				}
				defaults = in.Defaults
				for i, t := range in.Tasks {
					tasks[i] = t
				}
			case ev.GetWorkflowExecutionUpdateAcceptedEventAttributes() != nil:
				req := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput()
				p := req.GetArgs().GetPayloads()
				if req.GetName() != workflows.UpdateAddTasks || len(p) == 0 {
					continue
				}
				var page workflows.TaskPage
				if err := dc.FromPayload(p[0], &page); err != nil {
					return nil, defaults, fmt.Errorf("subflow: page of batch %s: %w", id, err)
				}
				for i, t := range page.Tasks {
					tasks[page.First+i] = t
				}
			case ev.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil:
				next = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
			}
		}
		runID = next
	}
	return tasks, defaults, nil
}
