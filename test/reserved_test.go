package e2e

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// The limiter's id cannot be taken by a user run (docs/temporal.md, reserved ids): the client
// refuses it up front, a StartSubagent started under it by other means rejects itself, and a
// workflow of another type squatting it (the temporal CLI can start anything) makes the
// provider's model requests fail at once, naming the squatter, instead of waiting for it.
func TestAdmissionIDSquat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	id := workflows.AdmissionWorkflowID(model.ProviderOpenAICompatible)
	dir := t.TempDir()
	in := rootInput(subagent.ProviderSpawn, dir, "m", "say ok")
	in.Request.AgentOptions = session.Route{Provider: model.ProviderOpenAICompatible, Model: "m"}
	in.Root.Route = in.Request.AgentOptions

	_, _, err := subflow.Start(ctx, env.c, subflow.StartOptions{WorkflowID: id, TaskQueue: env.taskQueue, Input: in})
	var ve *subagent.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, workflows.RuleReservedID, ve.Rule)
	// Other tests of the package run the real limiter under this id; whatever is there must not
	// be the refused run.
	if desc, err := env.c.DescribeWorkflowExecution(ctx, id, ""); err == nil {
		assert.NotEqual(t, workflows.WorkflowName, desc.GetWorkflowExecutionInfo().GetType().GetName(),
			"nothing started under the reserved id")
	}

	direct, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.ReservedIDPrefix + "direct-" + uuid.NewString(), TaskQueue: env.taskQueue},
		workflows.StartSubagent, in)
	require.NoError(t, err)
	err = direct.Get(ctx, nil)
	require.Error(t, err)
	ve = workflows.Rejection(err)
	require.NotNil(t, ve, "%v", err)
	assert.Equal(t, workflows.RuleReservedID, ve.Rule)

	// The squatter: a type no worker runs, on a queue nobody polls, under the limiter's id.
	_ = env.c.TerminateWorkflow(ctx, id, "", "test: make room for the squatter")
	squat, err := env.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-" + uuid.NewString()}, "Squatter")
	require.NoError(t, err)
	defer env.c.TerminateWorkflow(context.Background(), id, squat.GetRunID(), "test over")

	api := newLimitedAPI(t, 10)
	f := newFaultEnv(t, "")
	f.extraArgs = []string{"--model-concurrency", model.ProviderOpenAICompatible + "=2"}
	f.extraEnv = []string{"OPENAI_BASE_URL=" + api.srv.URL, "OPENAI_API_KEY=test-key"}
	f.startWorker()
	pub, run := f.start(in)
	var out workflows.Outcome
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, subagent.StopError, out.Result.StopReason, "%+v", out)
	store := f.openStore()
	defer store.Close()
	_, events, err := store.Load(ctx, pub.ChildID)
	require.NoError(t, err)
	var end session.TurnEndData
	require.NoError(t, events[len(events)-1].Decode(&end))
	err = errors.New(end.Reason.Message)
	assert.Contains(t, err.Error(), "Squatter")
	assert.Contains(t, err.Error(), id)
}
