package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// costTasks is the batch size of BenchmarkBatchCost: SUBFLOW_BENCH_COST_TASKS, else 20.
func costTasks() int {
	n := 20
	if v := os.Getenv("SUBFLOW_BENCH_COST_TASKS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
			n = 20
		}
	}
	return n
}

// rpcCounter counts the gRPC calls a client makes, by method.
type rpcCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r.mu.Lock()
	r.calls[method[strings.LastIndex(method, "/")+1:]]++
	r.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *rpcCounter) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.calls))
	for k, v := range r.calls {
		out[k] = v
	}
	return out
}

// historyCost is what a set of workflow runs cost the server, read from their histories.
type historyCost struct {
	bytes, workflowTasks, activityTasks, visibilityWrites int
	driveSeconds                                          float64
}

// add reads one run's history into c: its size, its workflow and activity tasks, the
// visibility writes it made (its start, its close, each search attribute or memo upsert)
// and the time its drives ran.
func (c *historyCost) add(b *testing.B, workflowID, runID string) (next string) {
	b.Helper()
	iter := env.c.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	c.visibilityWrites += 2
	started := map[int64]time.Time{}
	drives := map[int64]bool{}
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(b, err)
		c.bytes += proto.Size(ev)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			c.workflowTasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == workflows.ActivityDrive {
				drives[ev.GetEventId()] = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			c.activityTasks++
			started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = ev.GetEventTime().AsTime()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			id := ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
			if drives[id] {
				c.driveSeconds += ev.GetEventTime().AsTime().Sub(started[id]).Seconds()
			}
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
			c.visibilityWrites++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			next = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	return next
}

// BenchmarkBatchCost counts what one task of a batch costs the Temporal cluster: the
// requests the worker makes (polls, task completions, heartbeats, by gRPC method,
// counted by an interceptor on its client), the workflow and activity tasks, visibility
// writes and history bytes of the batch's runs and its children (read from their
// histories), per task and per minute of drive. Every drive heartbeats once a second
// (activities.DefaultHeartbeatInterval). Run it at a small size; the counts per task do not
// depend on the batch's size but for the batch's own share:
//
//	SUBFLOW_BENCH_COST_TASKS=20 go test -run '^$' -bench BatchCost -benchtime 1x ./bench/
func BenchmarkBatchCost(b *testing.B) {
	n := costTasks()
	counter := &rpcCounter{calls: map[string]int{}}
	wc, err := client.Dial(client.Options{HostPort: env.addr, Namespace: env.namespace,
		Logger:            log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counter.intercept)}}})
	require.NoError(b, err)
	defer wc.Close()
	queue := "cost-" + uuid.NewString()
	w, cleanup, err := app.New(wc, app.Options{TaskQueue: queue, SessionRoot: filepath.Join(env.tmp, "cost-sessions"), Logger: zap.NewNop()})
	require.NoError(b, err)
	require.NoError(b, w.Start())
	defer func() { w.Stop(); _ = cleanup() }()

	dir := b.TempDir()
	scriptPath := filepath.Join(dir, "script.json")
	// A drive of about three seconds: the answer streamed in six chunks.
	require.NoError(b, os.WriteFile(scriptPath, []byte(`{"responses": [{"text": "done", "chunks": 6, "delayMs": 3000}]}`), 0o644))
	tasks := make([]workflows.Task, n)
	for i := range tasks {
		tasks[i] = workflows.Task{Provider: subagent.ProviderSpawn, Task: "go", Cwd: dir, ModelProvider: model.ProviderScripted, Model: scriptPath}
	}
	for b.Loop() {
		before := counter.snapshot()
		id := "cost-" + uuid.NewString()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		run := startPagedBatch(ctx, b, id, queue, tasks, 0)
		var sum workflows.BatchSummary
		require.NoError(b, run.Get(ctx, &sum))
		cancel()
		require.True(b, sum.Completed(), "%+v", sum)
		// Let the worker's last responses land before counting.
		time.Sleep(time.Second)
		after := counter.snapshot()
		calls := map[string]int{}
		total := 0
		for m, v := range after {
			if d := v - before[m]; d > 0 {
				calls[m] = d
				total += d
			}
		}

		var batchCost, childCost historyCost
		desc, err := env.c.DescribeWorkflowExecution(context.Background(), id, "")
		require.NoError(b, err)
		for runID := desc.GetWorkflowExecutionInfo().GetFirstRunId(); runID != ""; {
			runID = batchCost.add(b, id, runID)
		}
		for i := range n {
			childCost.add(b, workflows.BatchChildWorkflowID(id, i), "")
		}
		per := func(v int) float64 { return float64(v) / float64(n) }
		driveMinutes := childCost.driveSeconds / 60
		b.ReportMetric(per(total), "worker-rpc/task")
		b.ReportMetric(per(childCost.workflowTasks+batchCost.workflowTasks), "workflow-tasks/task")
		b.ReportMetric(per(childCost.activityTasks+batchCost.activityTasks), "activity-tasks/task")
		b.ReportMetric(float64(calls["RecordActivityTaskHeartbeat"])/driveMinutes, "heartbeats/drive-min")
		b.ReportMetric(per(childCost.visibilityWrites+batchCost.visibilityWrites), "visibility-writes/task")
		b.ReportMetric(per(childCost.bytes+batchCost.bytes), "history-bytes/task")
		b.ReportMetric(float64(batchCost.bytes)/float64(n), "batch-history-bytes/task")
		b.ReportMetric(childCost.driveSeconds/float64(n), "drive-s/task")
		b.Logf("batch of %d tasks, %d runs: worker requests by method: %v", n, sum.Runs, calls)
	}
}
