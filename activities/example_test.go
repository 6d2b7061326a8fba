package activities_test

import (
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// Example registers the activities and the workflows on a worker of one's own and runs one
// delegation. Here the worker is the Temporal SDK's test environment; a real one is
// worker.New(c, workflows.TaskQueue, worker.Options{}), registered the same two ways.
func Example() {
	dir, err := os.MkdirTemp("", "activities-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		log.Fatal(err)
	}
	script := `{"responses": [{"text": "The tests pass."}]}`
	if err := os.WriteFile(filepath.Join(work, "answer.json"), []byte(script), 0o644); err != nil {
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

	// A root run: the workflow creates the depth-0 parent session in work, then spawns the
	// child, drives its turn and reads its result.
	route := session.Route{Provider: model.ProviderScripted, Model: "answer.json"}
	env.ExecuteWorkflow(workflows.WorkflowName, workflows.StartInput{
		Provider: subagent.ProviderSpawn,
		Request:  subagent.Request{Prompt: []session.Block{session.Text("Run the tests.")}},
		Root:     &workflows.RootSession{Cwd: work, Route: route},
	})
	var out workflows.Outcome
	if err := env.GetWorkflowResult(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Result.StopReason, out.Depth)
	fmt.Println(session.JoinText(out.Result.Output))
	// Output:
	// completed 1
	// The tests pass.
}
