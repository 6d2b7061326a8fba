package inprocess_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/subagent"
)

// Example spawns a child agent in this process against a file session store and the
// scripted model, and prints its answer. Without Temporal: Start returns once the child is
// published, Result waits for its turn, Dispose releases it.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "inprocess-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		log.Fatal(err)
	}
	// The scripted model answers from a file named by the route's model, found in the
	// session's working directory.
	script := `{"responses": [{"text": "Six times seven is 42."}]}`
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
	host, err := inprocess.NewHost(inprocess.Options{Store: store, Models: models, Tools: registry})
	if err != nil {
		log.Fatal(err)
	}

	// The delegating agent's own session: the child's parent.
	parent := session.Header{ID: "parent", Cwd: work,
		Route: &session.Route{Provider: model.ProviderScripted, Model: "answer.json"}}
	if err := store.Create(ctx, parent); err != nil {
		log.Fatal(err)
	}

	run, err := host.Start(ctx, subagent.Request{
		Prompt: []session.Block{session.Text("What is six times seven?")},
		Parent: subagent.ParentRef{SessionID: parent.ID},
	}, inprocess.StartOptions{Provider: subagent.ProviderSpawn})
	if err != nil {
		log.Fatal(err)
	}
	defer run.Dispose(ctx)
	res, err := run.Result(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.StopReason, run.Depth())
	fmt.Println(session.JoinText(res.Output))
	// Output:
	// completed 1
	// Six times seven is 42.
}
