// Package orchestrator is an example of a workflow of your own that delegates to subflow
// subagents: Orchestrator hands each task to a spawn subagent at once, as a child workflow
// (workflows.ExecuteSubagent), and returns their answers in order.
//
// Run it against `starter dev` (or any Temporal server with the subflow search attributes):
//
//	go run ./examples/orchestrator/worker      # subflow's worker plus Orchestrator
//	go run ./examples/orchestrator/starter --model-provider scripted --model script.json \
//	    "list the Go files" "count the TODOs"
//
// Cancelling the orchestrator aborts every subagent still running; each ends `aborted` with
// its partial answer.
package orchestrator

import (
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// WorkflowName is the registered name of Orchestrator.
const WorkflowName = "ExampleOrchestrator"

// Input is what Orchestrator delegates: each task to its own subagent, in a new root session
// working in Cwd, with the model Route.
type Input struct {
	Tasks []string      `json:"tasks"`
	Cwd   string        `json:"cwd"`
	Route session.Route `json:"route"`
}

// Answer is one subagent's result.
type Answer struct {
	Task       string              `json:"task"`
	StopReason subagent.StopReason `json:"stopReason"`
	Text       string              `json:"text"`
	// Error is the rejection or failure of a delegation that did not run.
	Error string `json:"error,omitempty"`
}

// Orchestrator delegates every task concurrently and waits for all answers.
func Orchestrator(ctx workflow.Context, in Input) ([]Answer, error) {
	answers := make([]Answer, len(in.Tasks))
	wg := workflow.NewWaitGroup(ctx)
	for i, task := range in.Tasks {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			out, err := workflows.ExecuteSubagent(ctx, workflows.StartInput{
				Provider: subagent.ProviderSpawn,
				Request: subagent.Request{
					Label:        task,
					Prompt:       []session.Block{session.Text(task)},
					AgentOptions: in.Route,
				},
				Root: &workflows.RootSession{Cwd: in.Cwd, Route: in.Route},
			})
			answers[i] = Answer{Task: task, StopReason: out.Result.StopReason, Text: session.JoinText(out.Result.Output)}
			if err != nil && out.Result.StopReason == "" {
				answers[i].Error = err.Error()
			}
		})
	}
	wg.Wait(ctx)
	return answers, ctx.Err()
}
