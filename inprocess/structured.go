package inprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

// Structured output (contract R-40…R-45). The model-visible strings are part of the contract.
const (
	// StructuredToolName is the child-scoped tool a structured child reports through.
	StructuredToolName = "structured_output"
	// StructuredToolDescription is that tool's description.
	StructuredToolDescription = "Report your final structured result. Call this exactly once, when your answer is complete; the arguments must match this tool's parameter schema exactly."
	// StructuredSectionName and StructuredSectionOrder place StructuredInstruction in the
	// child's system prompt.
	StructuredSectionName  = "tool:structured_output"
	StructuredSectionOrder = 190
	// StructuredInstruction is the system prompt section of a structured child.
	StructuredInstruction = "When you have your final answer, you MUST report it by calling the `structured_output` tool with arguments matching its parameter schema exactly. Do not finish with a plain text answer: only the tool call counts as your result."
	// StructuredAck is how the acknowledgement value {"recorded": true} is shown to the
	// model: the text of a successful structured_output result.
	StructuredAck = "Structured output recorded."
)

// structured is the runtime of one structured child: it commits the first execution of its
// tool that ends successfully, then ends the turn after that step and denies every later call.
// Executions are told apart by the observer, which sees each one's own call and result, never
// by call id: a model may repeat an id.
type structured struct {
	schema   *jsonschema.Schema
	conclude func()

	mu        sync.Mutex
	committed bool
}

// installStructured sets a's scope and prompt up for structured output against the schema
// (already checked by Create). committed says the stored log already holds a committed value
// (a resumed drive). revoke undoes the scope registrations.
func installStructured(a *agent.Agent, schema json.RawMessage, committed bool) (revoke func(), err error) {
	compiled, err := subagent.CompileSchema(schema)
	if err != nil {
		return nil, err
	}
	s := &structured{
		schema:    compiled,
		conclude:  a.ConcludeAfterStep,
		committed: committed,
	}
	scope := a.Scope()
	revokeTool, err := scope.Register(tools.Tool{
		Name:        StructuredToolName,
		Description: StructuredToolDescription,
		Parameters:  schema,
		Handler:     s.handle,
	})
	if err != nil {
		return nil, fmt.Errorf("inprocess: structured output: %w", err)
	}
	removeGuard := scope.AddGuard(s.guard)
	removeObserver := scope.AddObserver(s.observe)
	a.AddSection(agent.Section{Name: StructuredSectionName, Order: StructuredSectionOrder, Text: StructuredInstruction})
	return func() {
		removeObserver()
		removeGuard()
		revokeTool()
	}, nil
}

// handle validates a call's value. An invalid value is an error result the model may answer
// with another call in the same turn; a valid one is committed by observe.
func (s *structured) handle(_ context.Context, _ tools.Env, call tools.Call) (tools.Result, error) {
	if err := subagent.ValidateValue(s.schema, call.Input); err != nil {
		return tools.Result{}, fmt.Errorf("invalid arguments: %w", err)
	}
	return tools.TextResult(StructuredAck), nil
}

// guard denies every call once a value is committed. Calls that ran before the commit, in
// the same response too, are untouched: the guard only sees calls still to run.
func (s *structured) guard(_ context.Context, _ tools.Env, call tools.Call) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.committed {
		return ""
	}
	return fmt.Sprintf("structured output already recorded: the run is complete, so `%s` is not executed", call.Name)
}

// observe commits the value of an execution whose final result succeeded — only the handler
// gives a structured_output call a successful result, after validating it — and asks the
// agent to end the turn after this step. The value itself is read from the log
// (committedValue), where the same execution's input and result sit.
func (s *structured) observe(_ tools.Env, call tools.Call, res tools.Result) {
	if call.Name != StructuredToolName {
		return
	}
	s.mu.Lock()
	commit := !res.IsError && !s.committed
	if commit {
		s.committed = true
	}
	s.mu.Unlock()
	if commit {
		s.conclude()
	}
}

// committedValue returns the structured value a child's own events committed: the input of
// the first structured_output call whose tool/result succeeded (later ones are denied). It
// reads only the log, so any worker can answer it.
//
// Results are matched to the calls that were executed, not to ids: a model may repeat a call
// id within one response, and the agent stores the results in call order, so the n-th result
// with an id belongs to the n-th call with that id of the step's message.
func committedValue(events []session.Event) (json.RawMessage, error) {
	var calls map[string][]session.Block // the step's calls not yet matched, by id, in order
	for _, ev := range events {
		switch ev.Type {
		case session.TypeAssistantMessage:
			var d session.AssistantMessageData
			if err := ev.Decode(&d); err != nil {
				return nil, err
			}
			calls = make(map[string][]session.Block)
			for _, b := range d.Message.Content {
				if b.Type == session.BlockToolCall {
					calls[b.ID] = append(calls[b.ID], b)
				}
			}
		case session.TypeToolResult:
			var d session.ToolResultData
			if err := ev.Decode(&d); err != nil {
				return nil, err
			}
			queue := calls[d.CallID]
			if len(queue) == 0 {
				continue
			}
			call := queue[0]
			calls[d.CallID] = queue[1:]
			if call.Name == StructuredToolName && d.Name == StructuredToolName && !d.IsError {
				v := call.Input
				if len(v) == 0 {
					v = json.RawMessage("{}")
				}
				return v, nil
			}
		}
	}
	return nil, nil
}
