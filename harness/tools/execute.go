package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Execute runs call in this scope and returns the result to show the model. It never returns a
// Go error and never panics on a handler's account; every failure is an error result
// (ErrorResult). The steps, in order:
//
//  1. A tool that is unknown or hidden in this scope gives `Error: unknown tool "<name>"; …`.
//  2. The guards run in the order they were added; the first denial becomes `Error: <deny>`.
//  3. Input that is not a JSON object gives `Error: invalid arguments: …`. Empty input is
//     taken as `{}`, and handlers and observers see it that way.
//  4. When the tool's NeedsApproval reports true the call is rejected: no approver exists.
//  5. The handler runs; a returned error becomes `Error: <err>`, a panic an error result naming
//     the tool.
//
// Then every observer, in the order added, sees the call and its final result, whichever step
// produced it, before Execute returns.
func (s *Scope) Execute(ctx context.Context, env Env, call Call) Result {
	if len(bytes.TrimSpace(call.Input)) == 0 {
		call.Input = json.RawMessage("{}")
	}
	res := s.execute(ctx, env, call)
	for _, observe := range s.currentObservers() {
		observe(env, call, res)
	}
	return res
}

func (s *Scope) execute(ctx context.Context, env Env, call Call) Result {
	t, ok := s.lookup(call.Name)
	if !ok {
		return ErrorResult(s.unknownTool(call.Name))
	}
	for _, guard := range s.currentGuards() {
		if deny := guard(ctx, env, call); deny != "" {
			return ErrorResult(deny)
		}
	}
	if !isJSONObject(call.Input) {
		return ErrorResult(fmt.Sprintf("invalid arguments: the input of %s must be a JSON object, got %.80q",
			call.Name, call.Input))
	}
	if t.NeedsApproval != nil && t.NeedsApproval(env, call) {
		return ErrorResult(approvalRejected(call.Name, env))
	}
	res, err := runHandler(ctx, t, env, call)
	if err != nil {
		return ErrorResult(err.Error())
	}
	return res
}

func (s *Scope) unknownTool(name string) string {
	visible := s.Visible()
	if len(visible) == 0 {
		return fmt.Sprintf("unknown tool %q; no tools are available", name)
	}
	names := make([]string, len(visible))
	for i, t := range visible {
		names[i] = t.Name
	}
	return fmt.Sprintf("unknown tool %q; available tools: %s", name, strings.Join(names, ", "))
}

// approvalRejected explains a rejection for want of approval. subflow has no approver (a
// delegated child runs with approval policy "never"), so the model learns the call will not
// succeed however it is retried.
func approvalRejected(name string, env Env) string {
	msg := name + " needs approval"
	if env.SandboxMode != "" {
		msg += " while the sandbox is " + env.SandboxMode
	}
	msg += "; it was rejected automatically because no approver is available"
	if env.ApprovalPolicy != "" {
		msg += fmt.Sprintf(" (approval policy %q)", env.ApprovalPolicy)
	}
	return msg
}

// runHandler calls the handler, turning a panic into an error so one bad tool call cannot take
// the agent down.
func runHandler(ctx context.Context, t Tool, env Env, call Call) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s panicked: %v", t.Name, p)
		}
	}()
	return t.Handler(ctx, env, call)
}
