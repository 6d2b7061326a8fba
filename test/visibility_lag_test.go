package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// laggingClient is a client whose visibility lists leave out every closed run until the time
// until, as an eventually consistent visibility store (Elasticsearch, Temporal Cloud) leaves
// out the newest for a while: a gRPC interceptor trims ListWorkflowExecutions answers.
func laggingClient(t *testing.T, until time.Time) client.Client {
	t.Helper()
	return interceptedClient(t, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, callOpts...)
		if resp, ok := reply.(*workflowservice.ListWorkflowExecutionsResponse); ok && err == nil && time.Now().Before(until) {
			resp.Executions = slices.DeleteFunc(resp.Executions, func(e *workflowpb.WorkflowExecutionInfo) bool {
				return e.GetCloseTime() != nil
			})
		}
		return err
	})
}

// interceptedClient is a client of the shared server whose every unary call goes through
// intercept, closed when the test ends.
func interceptedClient(t *testing.T, intercept grpc.UnaryClientInterceptor) client.Client {
	t.Helper()
	opts := env.srv.ClientOptions()
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(intercept))
	c, err := client.Dial(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// TestBatchResultsLaggingVisibility: batch results count on the batch, not on visibility.
// With a visibility that lists none of the batch's closed children, the tasks under derived
// workflow ids are all found by id, and the tasks with ids of their own are named as missing;
// once visibility catches up, every task has its result, once.
func TestBatchResultsLaggingVisibility(t *testing.T) {
	cwd, starterDir := t.TempDir(), t.TempDir()
	ok := script(t, cwd, `{"text": "fine"}`)
	var tasks []workflows.Task
	own := map[int]bool{3: true, 7: true}
	for i := range 10 {
		task := scriptedTask(subagent.ProviderSpawn, cwd, ok, fmt.Sprintf("task %d", i))
		if own[i] {
			task.ID = "own-" + uuid.NewString()
		}
		tasks = append(tasks, task)
	}
	code, stdout, stderr := runStarter(t, starterDir, "batch", "--detach", "--task-queue", env.taskQueue,
		writeTaskFile(t, starterDir, tasks))
	require.Equal(t, 0, code, "stderr: %s", stderr)
	batchID := strings.TrimSpace(stdout)
	sum := waitBatch(t, batchID, waitLimit)
	require.True(t, sum.Completed(), "%+v", sum)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	hidden := laggingClient(t, time.Now().Add(time.Hour))
	results, err := subflow.BatchResults(ctx, hidden, batchID, subflow.BatchResultsOptions{})
	var short *subflow.MissingResults
	require.True(t, errors.As(err, &short), "want the missing tasks named, got %v", err)
	assert.Equal(t, []int{3, 7}, short.Tasks, "the tasks with their own ids are missing, by number")
	assert.Equal(t, 2, short.Count)
	require.Len(t, results, 8, "every task under a derived id is found without visibility")
	for _, r := range results {
		assert.False(t, own[r.Index], "task %d", r.Index)
		assert.Equal(t, "fine", r.Output)
	}

	// A visibility that catches up a moment later: the wait ends with every result.
	var told []subflow.MissingResults
	catchingUp := laggingClient(t, time.Now().Add(3*time.Second))
	results, err = subflow.BatchResults(ctx, catchingUp, batchID, subflow.BatchResultsOptions{
		Wait:    waitLimit / 2,
		Missing: func(m subflow.MissingResults) { told = append(told, m) },
	})
	require.NoError(t, err)
	require.Len(t, results, len(tasks))
	for i, r := range results {
		assert.Equal(t, i, r.Index, "each task once, in order")
		assert.Equal(t, subagent.StopCompleted, r.StopReason)
	}
	require.NotEmpty(t, told, "the wait said what it waited for")
	assert.Equal(t, []int{3, 7}, told[0].Tasks)
}
