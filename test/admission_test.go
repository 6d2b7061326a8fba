package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// limitedAPI is an OpenAI-compatible server that answers 429 with Retry-After: 1 whenever
// more than limit requests are open, and otherwise streams a short answer.
type limitedAPI struct {
	srv      *httptest.Server
	limit    int64
	hold     time.Duration // how long each answer stays open; 50 ms when 0
	open     atomic.Int64
	mu       sync.Mutex
	maxOpen  int64
	served   int
	refusals int
}

func newLimitedAPI(t testing.TB, limit int64) *limitedAPI {
	return newLimitedAPIHolding(t, limit, 50*time.Millisecond)
}

// newLimitedAPIHolding is newLimitedAPI whose answers stay open for hold.
func newLimitedAPIHolding(t testing.TB, limit int64, hold time.Duration) *limitedAPI {
	a := &limitedAPI{limit: limit, hold: hold}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := a.open.Add(1)
		closed := false
		closeReq := func() {
			if !closed {
				closed = true
				a.open.Add(-1)
			}
		}
		defer closeReq()
		a.mu.Lock()
		a.maxOpen = max(a.maxOpen, n)
		a.mu.Unlock()
		if n > a.limit {
			a.mu.Lock()
			a.refusals++
			a.mu.Unlock()
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error": {"message": "too many open requests", "type": "rate_limit"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":%s}]}`+"\n\n", delta, f)
			w.(http.Flusher).Flush()
		}
		chunk("o", "")
		// Keep the request open a moment, so requests overlap.
		time.Sleep(a.hold)
		chunk("k", "stop")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`+"\n\n")
		a.mu.Lock()
		a.served++
		a.mu.Unlock()
		// Closed before its last bytes go out: the client cannot have seen its end and
		// started another request while this one still counts as open.
		closeReq()
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// TestModelAdmissionAcrossWorkers: two worker processes, each told the same limit N for the
// openai-compatible provider, run a batch of 200 at concurrency 50 against a server that
// refuses more than N open requests: every run completes, and the server never sees more
// than N open requests, because every request first takes a permit from the cluster-wide
// ModelAdmission workflow.
func TestModelAdmissionAcrossWorkers(t *testing.T) {
	const limit = 4
	terminateAdmission(t, model.ProviderOpenAICompatible)
	api := newLimitedAPI(t, limit)
	f := newFaultEnv(t, "")
	f.extraArgs = []string{"--model-concurrency", fmt.Sprintf("%s=%d", model.ProviderOpenAICompatible, limit)}
	f.extraEnv = []string{"OPENAI_BASE_URL=" + api.srv.URL, "OPENAI_API_KEY=test-key"}
	f.startWorker()
	f.startWorker()

	dir := t.TempDir()
	const n = 200
	tasks := make([]workflows.Task, n)
	for i := range tasks {
		tasks[i] = workflows.Task{Task: "say ok", Cwd: dir, ModelProvider: model.ProviderOpenAICompatible, Model: "m"}
	}
	batchID := "batch-" + uuid.NewString()
	ctx, cancel := context.WithTimeout(context.Background(), batchLimit)
	defer cancel()
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: f.taskQueue},
		workflows.BatchWorkflowName, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Total: n, Concurrency: 50, TaskQueue: f.taskQueue})
	require.NoError(t, err)
	var sum workflows.BatchSummary
	require.NoError(t, run.Get(ctx, &sum))

	assert.Equal(t, n, sum.Done)
	assert.Zero(t, sum.Failed, "%+v", sum)
	assert.Equal(t, n, sum.ByStopReason[subagent.StopCompleted], "%+v", sum)
	assert.EqualValues(t, n*10, sum.InputTokens, "the batch totals the runs' usage")
	assert.EqualValues(t, n*2, sum.OutputTokens)
	api.mu.Lock()
	defer api.mu.Unlock()
	assert.LessOrEqual(t, api.maxOpen, int64(limit), "the server saw more than %d open requests", limit)
	assert.Zero(t, api.refusals)
	assert.Equal(t, n, api.served)
}

// TestModelAdmissionLimiter drives a ModelAdmission directly, as workers do: 12 holders
// acquire, hold and release permits at once; never more than the limit hold one.
func TestModelAdmissionLimiter(t *testing.T) {
	const limit, holders = 3, 8 // under the server's 10 in-flight updates
	provider := "limiter-" + uuid.NewString()
	id := workflows.AdmissionWorkflowID(provider)
	var held, maxHeld atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, holders)
	for range holders {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), batchLimit)
			defer cancel()
			op := env.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
				ID: id, TaskQueue: env.taskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			}, workflows.AdmissionWorkflowName, workflows.AdmissionInput{Provider: provider, Limit: limit})
			h, err := env.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
				StartWorkflowOperation: op,
				UpdateOptions: client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateAcquire,
					WaitForStage: client.WorkflowUpdateStageAccepted},
			})
			var permit string
			if err == nil {
				err = h.Get(ctx, &permit)
			}
			if err != nil {
				// The server's cap on in-flight updates: workers send the acquire again.
				errs <- err
				return
			}
			n := held.Add(1)
			for {
				m := maxHeld.Load()
				if n <= m || maxHeld.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			held.Add(-1)
			if err := env.c.SignalWorkflow(ctx, id, "", workflows.SignalRelease, permit); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, maxHeld.Load(), int64(limit))
	assert.Positive(t, maxHeld.Load())
	require.NoError(t, env.c.TerminateWorkflow(context.Background(), id, "", "test over"))
}

// terminateAdmission ends the ModelAdmission of provider if one runs, so a test starts its
// own with its own limit on its own task queue (the limiter of an earlier test may run on a
// queue no worker serves any more), and ends it again after the test.
func terminateAdmission(t testing.TB, provider string) {
	end := func() {
		_ = env.c.TerminateWorkflow(context.Background(), workflows.AdmissionWorkflowID(provider), "", "test boundary")
	}
	end()
	t.Cleanup(end)
}

// TestModelAdmissionSDKChildren: sdk children's model requests take the same cluster-wide
// permits as in-process drives. A batch of sdk runs against a server that refuses more than
// N open requests, with --model-concurrency N on the workers: the server never sees more
// than N open requests, and every run reports its token usage, in its result, in the
// batch's totals and in its search attributes, as in-process runs do.
func TestModelAdmissionSDKChildren(t *testing.T) {
	const limit, n = 2, 8
	terminateAdmission(t, model.ProviderOpenAICompatible)
	// Each answer stays open half a second: unadmitted, the 8 children would overlap.
	api := newLimitedAPIHolding(t, limit, 500*time.Millisecond)
	f := newFaultEnv(t, "")
	f.extraArgs = []string{"--model-concurrency", fmt.Sprintf("%s=%d", model.ProviderOpenAICompatible, limit)}
	f.extraEnv = []string{"OPENAI_BASE_URL=" + api.srv.URL, "OPENAI_API_KEY=test-key"}
	f.startWorker()
	f.startWorker()

	dir := t.TempDir()
	tasks := make([]workflows.Task, n)
	for i := range tasks {
		tasks[i] = workflows.Task{Provider: subagent.ProviderSDK, Task: "say ok", Cwd: dir, ModelProvider: model.ProviderOpenAICompatible, Model: "m"}
	}
	batchID := "batch-" + uuid.NewString()
	ctx, cancel := context.WithTimeout(context.Background(), batchLimit)
	defer cancel()
	run, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: batchID, TaskQueue: f.taskQueue},
		workflows.BatchWorkflowName, workflows.BatchInput{BatchID: batchID, Tasks: tasks, Total: n, Concurrency: n, TaskQueue: f.taskQueue})
	require.NoError(t, err)
	var sum workflows.BatchSummary
	require.NoError(t, run.Get(ctx, &sum))
	assert.Equal(t, n, sum.ByStopReason[subagent.StopCompleted], "%+v", sum)
	assert.EqualValues(t, n*10, sum.InputTokens, "the batch totals the sdk runs' usage")
	assert.EqualValues(t, n*2, sum.OutputTokens)

	// One more run on its own: its result and its search attributes carry its tokens.
	in := rootInput(subagent.ProviderSDK, dir, "m", "say ok")
	in.Request.AgentOptions.Provider = model.ProviderOpenAICompatible
	in.Root.Route = in.Request.AgentOptions
	_, one := f.start(in)
	out, cancelled := outcome(t, one)
	require.False(t, cancelled)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, session.Usage{InputTokens: 10, OutputTokens: 2}, out.Usage)
	desc, err := env.c.DescribeWorkflowExecution(ctx, one.GetID(), one.GetRunID())
	require.NoError(t, err)
	fields := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	for name, want := range map[string]int64{"SubagentInputTokens": 10, "SubagentOutputTokens": 2} {
		var got int64
		require.Contains(t, fields, name)
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(fields[name], &got))
		assert.Equal(t, want, got, name)
	}

	api.mu.Lock()
	defer api.mu.Unlock()
	assert.LessOrEqual(t, api.maxOpen, int64(limit), "the server saw more than %d open requests", limit)
	assert.Equal(t, int64(limit), api.maxOpen, "the children's requests did overlap up to the limit")
	assert.Zero(t, api.refusals)
	assert.Equal(t, n+1, api.served)
}
