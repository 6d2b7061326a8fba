// Command starter runs the example's Orchestrator with the tasks given as arguments and
// prints each subagent's answer.
//
//	starter [--model-provider deepseek-official] [--model NAME] TASK...
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/subflow-dev/subflow/examples/orchestrator"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/workflows"
)

func main() {
	provider := flag.String("model-provider", "deepseek-official", "model provider of the subagents")
	model := flag.String("model", "deepseek-chat", "model of the subagents")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatalln("usage: starter [--model-provider P] [--model M] TASK...")
	}
	cwd, err := os.Getwd()
	if err != nil {
		log.Fatalln(err)
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		log.Fatalln("load Temporal client options:", err)
	}
	c, err := client.Dial(opts)
	if err != nil {
		log.Fatalln("connect to Temporal:", err)
	}
	defer c.Close()
	ctx := context.Background()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: workflows.TaskQueue}, orchestrator.WorkflowName,
		orchestrator.Input{Tasks: flag.Args(), Cwd: cwd, Route: session.Route{Provider: *provider, Model: *model}})
	if err != nil {
		log.Fatalln("start orchestrator:", err)
	}
	var answers []orchestrator.Answer
	if err := run.Get(ctx, &answers); err != nil {
		log.Fatalln("orchestrator:", err)
	}
	for _, a := range answers {
		fmt.Printf("%s [%s]\n%s%s\n\n", a.Task, a.StopReason, a.Text, a.Error)
	}
}
