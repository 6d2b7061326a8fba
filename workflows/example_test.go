package workflows_test

import (
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// Review is a workflow of one's own that delegates a review to a subagent and returns its
// answer. The delegation is a StartSubagent child workflow: cancelling Review aborts it.
func Review(ctx workflow.Context, dir string) (string, error) {
	out, err := workflows.ExecuteSubagent(ctx, workflows.StartInput{
		Provider: subagent.ProviderSpawn,
		Request:  subagent.Request{Prompt: []session.Block{session.Text("Review the change.")}},
		Root: &workflows.RootSession{Cwd: dir,
			Route: session.Route{Provider: model.ProviderScripted, Model: "review.json"}},
	})
	if err != nil {
		return "", err
	}
	return string(out.Result.StopReason) + ": " + session.JoinText(out.Result.Output), nil
}

// ExampleExecuteSubagent runs Review on the Temporal SDK's test environment, with
// subflow's workflows and activities registered as a worker of one's own would.
func ExampleExecuteSubagent() {
	dir, err := os.MkdirTemp("", "workflows-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		log.Fatal(err)
	}
	script := `{"responses": [{"text": "Looks good to me."}]}`
	if err := os.WriteFile(filepath.Join(work, "review.json"), []byte(script), 0o644); err != nil {
		log.Fatal(err)
	}
	store, err := filestore.New(filepath.Join(dir, "sessions"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	models := &model.Registry{}
	models.Register(model.ProviderScripted, model.NewScripted())
	registry := &tools.Registry{}
	if err := tools.RegisterBuiltins(registry); err != nil {
		log.Fatal(err)
	}
	acts, err := activities.New(activities.Config{Store: store, Models: models, Tools: registry})
	if err != nil {
		log.Fatal(err)
	}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	workflows.Register(env)
	activities.Register(env, acts)
	env.RegisterWorkflow(Review)

	env.ExecuteWorkflow(Review, work)
	var answer string
	if err := env.GetWorkflowResult(&answer); err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer)
	// Output: completed: Looks good to me.
}
