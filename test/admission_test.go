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

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// limitedAPI is an OpenAI-compatible server that answers 429 with Retry-After: 1 whenever
// more than limit requests are open, and otherwise streams a short answer.
type limitedAPI struct {
	srv      *httptest.Server
	limit    int64
	open     atomic.Int64
	mu       sync.Mutex
	maxOpen  int64
	served   int
	refusals int
}

func newLimitedAPI(t testing.TB, limit int64) *limitedAPI {
	a := &limitedAPI{limit: limit}
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
		time.Sleep(50 * time.Millisecond)
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
