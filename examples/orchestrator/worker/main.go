// Command worker serves subflow's workflows and activities and the example's Orchestrator
// on task queue "subflow", with sessions under $SUBFLOW_SESSION_ROOT (or the per-user
// default). The Temporal connection comes from TEMPORAL_ADDRESS.
package main

import (
	"log"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/examples/orchestrator"
	"github.com/subflow-dev/subflow/worker/app"
)

func main() {
	// The worker is also its own sdk child runtime (the default sdk child command).
	app.MaybeRunChildRuntime()
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		log.Fatalln("load Temporal client options:", err)
	}
	c, err := client.Dial(opts)
	if err != nil {
		log.Fatalln("connect to Temporal:", err)
	}
	defer c.Close()
	w, cleanup, err := app.New(c, app.Options{})
	if err != nil {
		log.Fatalln("build worker:", err)
	}
	defer func() { _ = cleanup() }()
	w.RegisterWorkflowWithOptions(orchestrator.Orchestrator, workflow.RegisterOptions{Name: orchestrator.WorkflowName})
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatalln("worker:", err)
	}
}
