package subflow_test

import (
	"context"
	"fmt"
	"log"

	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// ExampleStart delegates a task from outside any worker: Start returns at the child's
// publication with its child id and depth, then the run is awaited for its Outcome. It needs
// a Temporal server and a subflow worker, so go test compiles it without running it;
// examples/orchestrator's TestOrchestrator makes the same calls on the embedded server.
func ExampleStart() {
	ctx := context.Background()
	c, err := client.Dial(client.Options{}) // localhost:7233, namespace "default"
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	published, run, err := subflow.Start(ctx, c, subflow.StartOptions{Input: workflows.StartInput{
		Provider: subagent.ProviderSpawn,
		Request:  subagent.Request{Prompt: []session.Block{session.Text("Summarise the design doc.")}},
		Root:     &workflows.RootSession{Cwd: "/srv/work/design"},
	}})
	if err != nil {
		log.Fatal(err) // a rejection is a *subagent.ValidationError with the contract's message
	}
	fmt.Println("published", published.ChildID, "at depth", published.Depth)
	var out workflows.Outcome
	err = run.Get(ctx, &out)
	out, err = workflows.RunOutcome(out, err) // an aborted run keeps its partial answer
	if err != nil {
		log.Fatal(err)
	}
	// A big answer travels by reference through the session store.
	if err := subflow.ResolveOutcome(ctx, c, "", &out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Result.StopReason, session.JoinText(out.Result.Output))
}
