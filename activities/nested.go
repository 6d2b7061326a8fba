package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// NestedChildID returns the child id of the nested run that the subagent tool call callID of
// session sessionID starts (subagenttool.NestedChildID); its workflow id is workflows.WorkflowID
// of it, so the same call, run again by a retried drive, names the same workflow.
func NestedChildID(sessionID, callID string) string {
	return subagenttool.NestedChildID(sessionID, callID)
}

// checkSubagentTool rejects a subagent tool configuration the tool could not honour.
func checkSubagentTool(provider string, maxDepth subagent.MaxDepthSetting) error {
	caps, ok := subagent.ProviderCapabilities(provider)
	if !ok {
		return fmt.Errorf("subagent tool: no subagent provider registered for %q", provider)
	}
	if err := maxDepth.CheckProvider(provider, caps); err != nil {
		return fmt.Errorf("subagent tool: %w", err)
	}
	return nil
}

// subagentTool returns the subagent tool of a drive. Its calls are deferred: each is added to
// the drive's delegations for the workflow to run as a child workflow, and the call stays
// unanswered until RecordNested stores the child's result.
func (a *Activities) subagentTool(deferred *delegations) (tools.Tool, error) {
	return subagenttool.New(subagenttool.Options{
		DefaultProvider: a.nestedProvider,
		MaxDepth:        a.nestedMaxDepth,
		Capabilities:    subagent.ProviderCapabilities,
		Delegate: func(_ context.Context, call subagenttool.DelegateCall) (subagent.Result, error) {
			deferred.add(workflows.Delegation{
				CallID:   call.CallID,
				ChildID:  NestedChildID(call.Request.Parent.SessionID, call.CallID),
				Provider: call.Provider,
				Request:  call.Request,
			})
			return subagent.Result{}, subagenttool.ErrDeferred
		},
	})
}

// delegations collects the calls a drive deferred; tool calls may run concurrently.
type delegations struct {
	mu   sync.Mutex
	list []workflows.Delegation
}

func (d *delegations) add(del workflows.Delegation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, del)
}

func (d *delegations) all() []workflows.Delegation {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.list
}

// RecordNested stores the result of each closed nested run of in.Calls as the tool result
// of its call in the pending step of session in.ChildID, rendered as the subagent tool
// renders a result it waited for (subagenttool.ToolResult), and syncs. Calls that have a result
// already (a retried attempt) are skipped. The results are read from the runs through the
// client: a Canceled run's details carry its aborted outcome, partial output included; a
// rejected run's failure its exact message. It holds the session lease while it writes, and
// writes fenced by it.
func (a *Activities) RecordNested(ctx context.Context, in workflows.RecordNestedInput) error {
	log := a.logger(ctx, in.ChildID)
	lease, err := a.lease(ctx, log, in.ChildID)
	if err != nil {
		return fmt.Errorf("activities: record nested results of %s: %w", in.ChildID, err)
	}
	defer lease.end()
	store := lease.store // fenced: a stale attempt's writes are refused
	_, events, err := store.Load(ctx, in.ChildID)
	if err != nil {
		return fmt.Errorf("activities: record nested results of %s: %w", in.ChildID, err)
	}
	step, answered, err := session.PendingStep(events)
	if err != nil {
		return fmt.Errorf("activities: record nested results of %s: %w", in.ChildID, err)
	}
	c := a.client(ctx)
	seq := int64(len(events))
	for _, call := range in.Calls {
		if answered[call.CallID] {
			continue
		}
		var out workflows.Outcome
		gerr := c.GetWorkflow(ctx, call.WorkflowID, "").Get(ctx, &out)
		res, rerr := a.nestedResult(ctx, call.WorkflowID, out, gerr)
		if rerr != nil && ctx.Err() != nil {
			return fmt.Errorf("activities: record nested results of %s: %w", in.ChildID, ctx.Err())
		}
		tr := subagenttool.ToolResult(res, rerr)
		ev, err := session.NewEvent(session.TypeToolResult, session.ToolResultData{
			Turn: step.Turn, Step: step.Step, CallID: call.CallID, Name: subagenttool.Name,
			IsError: tr.IsError, Content: tr.Content,
		})
		if err != nil {
			return fmt.Errorf("activities: record nested results of %s: %w", in.ChildID, err)
		}
		ev.Seq = seq
		if err := store.Append(ctx, in.ChildID, ev); err != nil {
			return fmt.Errorf("activities: record nested results of %s: %w", in.ChildID, err)
		}
		seq++
		log.Info("nested result recorded", zap.String("callId", call.CallID),
			zap.String("nestedWorkflowId", call.WorkflowID), zap.String("stopReason", string(res.StopReason)))
	}
	if err := store.Sync(ctx, in.ChildID); err != nil {
		return fmt.Errorf("activities: record nested results of %s: %w", in.ChildID, err)
	}
	return nil
}

// nestedResult maps how a nested run ended to the subagent tool's result: its outcome, the
// outcome of a Canceled run (its details), or the rejection with its exact message. A result
// stored by reference is read from the session store.
func (a *Activities) nestedResult(ctx context.Context, workflowID string, out workflows.Outcome, err error) (subagent.Result, error) {
	out, err = workflows.RunOutcome(out, err)
	var ve *subagent.ValidationError
	switch {
	case err == nil || temporal.IsCanceledError(err):
		return a.inlineResult(ctx, out)
	case errors.As(err, &ve):
		return subagent.Result{}, ve
	}
	return subagent.Result{}, fmt.Errorf("subagent: nested run %s: %w", workflowID, err)
}
