package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestBatchResultsFromTheBatchHistory: a batch's results are read from the batch's own
// history, each the same as read from the child's run (its answer, its label, its ids), and
// without reading the children's histories when every child completed in the run that
// started it; with children handed across continue-as-new, or told a namespace the batch is
// not in, every task still has its result, once and the same.
func TestBatchResultsFromTheBatchHistory(t *testing.T) {
	dir := t.TempDir()
	answer := script(t, dir, `{"text": "from the child"}`)
	tasks := func(n int) []workflows.Task {
		ts := spawnTasks(dir, answer, n)
		for i := range ts {
			ts[i].Label = fmt.Sprintf("label %d", i)
		}
		ts[1].ID = "own-" + uuid.NewString()
		return ts
	}
	var childReads atomic.Int64
	var batchID string
	c := interceptedClient(t, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		if r, ok := req.(*workflowservice.GetWorkflowExecutionHistoryRequest); ok && r.GetExecution().GetWorkflowId() != batchID {
			childReads.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, callOpts...)
	})

	for _, tc := range []struct {
		name               string
		in                 workflows.BatchInput
		readsNoChildResult bool
	}{
		{"one run", workflows.BatchInput{Tasks: tasks(6), Concurrency: 3}, true},
		{"continued as new every 2 children", workflows.BatchInput{Tasks: tasks(8), Concurrency: 3, ContinueAsNewAfter: 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.BatchID = "batch-" + uuid.NewString()
			batchID = tc.in.BatchID
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			require.NoError(t, startBatch(t, tc.in).Get(ctx, nil))

			childReads.Store(0)
			results := readResults(t, c, batchID)
			if tc.readsNoChildResult {
				assert.Zero(t, childReads.Load(), "every result came from the batch's history")
			}
			// Told another namespace than the client's, the reader finds no history of the
			// batch there and reads every result from its child's run: the same results.
			elsewhere, err := subflow.BatchResults(ctx, c, batchID, subflow.BatchResultsOptions{Namespace: "not-the-clients"})
			require.NoError(t, err)
			require.Len(t, elsewhere, len(results))
			for n, r := range elsewhere {
				assert.Equal(t, results[n], r, "task %d", n)
			}
			if tc.readsNoChildResult {
				assert.Positive(t, childReads.Load(), "the results were read from the children's runs")
			}
			require.Len(t, results, len(tc.in.Tasks))
			for n, r := range results {
				var out workflows.Outcome
				require.NoError(t, env.c.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &out), "task %d", n)
				in, err := subflow.StartInputOf(ctx, env.c, r.WorkflowID, "")
				require.NoError(t, err, "task %d", n)
				assert.Equal(t, fmt.Sprintf("label %d", n), r.Label, "task %d", n)
				assert.Equal(t, in.Request.Label, r.Label, "task %d", n)
				assert.Equal(t, "from the child", r.Output, "task %d", n)
				assert.Equal(t, subagent.StopCompleted, r.StopReason, "task %d", n)
				assert.Equal(t, out.Result.StopReason, r.StopReason, "task %d", n)
				assert.Equal(t, out.ChildID, r.ChildID, "task %d", n)
				assert.Equal(t, out.Usage.OutputTokens, r.OutputTokens, "task %d", n)
				if n == 1 {
					assert.Equal(t, tc.in.Tasks[1].ID, r.WorkflowID, "a task's own workflow id")
				}
			}
		})
	}
}
