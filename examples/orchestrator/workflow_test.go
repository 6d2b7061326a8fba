package orchestrator_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/devserver"
	"github.com/subflow-dev/subflow/examples/orchestrator"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// TestOrchestrator runs the example on the embedded server, as its worker and starter do:
// two tasks, each answered by its own subagent, the answers in task order.
func TestOrchestrator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI, LogLevel: "error"})
	require.NoError(t, err)
	defer func() { _ = srv.Stop() }()
	c, err := srv.NewClient(ctx)
	require.NoError(t, err)
	defer c.Close()

	dir := t.TempDir()
	taskQueue := "example-orchestrator"
	w, cleanup, err := app.New(c, app.Options{
		TaskQueue: taskQueue, SessionRoot: filepath.Join(dir, "sessions"), SDKCommand: "/bin/false", Logger: zap.NewNop(),
	})
	require.NoError(t, err)
	defer func() { _ = cleanup() }()
	w.RegisterWorkflowWithOptions(orchestrator.Orchestrator, workflow.RegisterOptions{Name: orchestrator.WorkflowName})
	require.NoError(t, w.Start())
	defer w.Stop()

	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses": [{"text": "the answer"}]}`), 0o644))
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: taskQueue}, orchestrator.WorkflowName,
		orchestrator.Input{
			Tasks: []string{"first task", "second task"},
			Cwd:   dir,
			Route: session.Route{Provider: model.ProviderScripted, Model: script},
		})
	require.NoError(t, err)
	var answers []orchestrator.Answer
	require.NoError(t, run.Get(ctx, &answers))
	assert.Equal(t, []orchestrator.Answer{
		{Task: "first task", StopReason: subagent.StopCompleted, Text: "the answer"},
		{Task: "second task", StopReason: subagent.StopCompleted, Text: "the answer"},
	}, answers)

	// subflow.Start from outside any worker, as the root package's ExampleStart shows.
	published, wrun, err := subflow.Start(ctx, c, subflow.StartOptions{TaskQueue: taskQueue, Input: workflows.StartInput{
		Provider: subagent.ProviderSpawn,
		Request:  subagent.Request{Prompt: []session.Block{session.Text("Summarise the design doc.")}},
		Root:     &workflows.RootSession{Cwd: dir, Route: session.Route{Provider: model.ProviderScripted, Model: script}},
	}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), published.Depth)
	var out workflows.Outcome
	err = wrun.Get(ctx, &out)
	out, err = workflows.RunOutcome(out, err)
	require.NoError(t, err)
	require.NoError(t, subflow.ResolveOutcome(ctx, c, taskQueue, &out))
	assert.Equal(t, published.ChildID, out.ChildID)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "the answer", session.JoinText(out.Result.Output))
}
