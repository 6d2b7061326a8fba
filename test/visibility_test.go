package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/subflow-dev/subflow/subagent"
)

// TestVisibilityQuery: the search attributes of contract R-75 find runs by provider and stop
// reason. The runs carry a fresh SubagentBatch so that the runs of other tests on the shared
// server stay out of the answer.
func TestVisibilityQuery(t *testing.T) {
	dir := t.TempDir()
	batch := uuid.NewString()
	ok := script(t, dir, `{"text": "fine"}`)
	broken := script(t, dir, `{"error": "scripted failure"}`)

	type runSpec struct {
		provider, script string
		want             subagent.StopReason
	}
	specs := []runSpec{
		{subagent.ProviderSDK, ok, subagent.StopCompleted},
		{subagent.ProviderSDK, ok, subagent.StopCompleted},
		{subagent.ProviderSDK, broken, subagent.StopError},
		{subagent.ProviderSpawn, ok, subagent.StopCompleted},
	}
	var sdkCompleted, completed []string
	for _, s := range specs {
		in := rootInput(s.provider, dir, s.script, "visible")
		in.Batch = batch
		_, run := start(t, in)
		out, cancelled := outcome(t, run)
		require.False(t, cancelled)
		require.Equal(t, s.want, out.Result.StopReason)
		if s.want == subagent.StopCompleted {
			completed = append(completed, run.GetID())
			if s.provider == subagent.ProviderSDK {
				sdkCompleted = append(sdkCompleted, run.GetID())
			}
		}
	}

	scope := fmt.Sprintf("SubagentBatch = '%s' AND ", batch)
	requireListed(t, scope+"SubagentStopReason = 'completed' AND SubagentProvider = 'sdk'", sdkCompleted)
	requireListed(t, scope+"SubagentStopReason = 'completed'", completed)
}

// requireListed waits until query lists exactly the workflow ids want (visibility is
// eventually consistent).
func requireListed(t *testing.T, query string, want []string) {
	t.Helper()
	slices.Sort(want)
	var got []string
	require.Eventually(t, func() bool {
		resp, err := env.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, e := range resp.GetExecutions() {
			got = append(got, e.GetExecution().GetWorkflowId())
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	}, waitLimit, 200*time.Millisecond, "query %q", query)
	require.Equal(t, want, got, "query %q", query)
}
