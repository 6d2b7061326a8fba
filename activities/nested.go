package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	subflow "github.com/subflow-dev/subflow/client"
	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// NestedCancelWait bounds how long a cancelled subagent tool call waits for its nested run to
// end Canceled and hand over its partial output.
const NestedCancelWait = 30 * time.Second

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

// subagentTool returns the subagent tool of the drive running under the activity context
// actx. With yield (workflows.DriveInput.Yield) its calls are deferred: each is added to
// the drive's delegations for the workflow to run as a child workflow. Without it each call
// starts a separate StartSubagent run on this worker's task queue and waits for it there
// (delegate), as workflows recorded before child workflows expect.
func (a *Activities) subagentTool(actx context.Context, yield bool, deferred *delegations) (tools.Tool, error) {
	return subagenttool.New(subagenttool.Options{
		DefaultProvider: a.nestedProvider,
		MaxDepth:        a.nestedMaxDepth,
		Capabilities:    subagent.ProviderCapabilities,
		Delegate: func(ctx context.Context, call subagenttool.DelegateCall) (subagent.Result, error) {
			if yield {
				deferred.add(workflows.Delegation{
					CallID:   call.CallID,
					ChildID:  NestedChildID(call.Request.Parent.SessionID, call.CallID),
					Provider: call.Provider,
					Request:  call.Request,
				})
				return subagent.Result{}, subagenttool.ErrDeferred
			}
			return a.delegate(actx, ctx, call)
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
	step, answered, err := pendingStep(events)
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

// pendingStep returns the last step of a log that ends inside a turn, and the call ids of
// that step that have a tool result.
func pendingStep(events []session.Event) (session.StepData, map[string]bool, error) {
	answered := map[string]bool{}
	for i := len(events) - 1; i >= 0; i-- {
		ev := events[i]
		switch ev.Type {
		case session.TypeTurnEnd, session.TypeStepEnd:
			return session.StepData{}, nil, errors.New("the log does not end inside a step")
		case session.TypeToolResult:
			var d session.ToolResultData
			if err := ev.Decode(&d); err != nil {
				return session.StepData{}, nil, err
			}
			answered[d.CallID] = true
		case session.TypeStepStart:
			var d session.StepData
			if err := ev.Decode(&d); err != nil {
				return session.StepData{}, nil, err
			}
			return d, answered, nil
		}
	}
	return session.StepData{}, nil, errors.New("the log has no step")
}

// delegate runs one subagent tool call as a nested StartSubagent run whose parent session is
// the calling child, and waits for its result. The Drive's heartbeat ticker keeps running
// meanwhile.
//
// The run's workflow id is a function of the calling session and the call id, started with
// conflict policy use-existing and reuse policy reject-duplicate: a call that runs again
// after its drive moved to another worker (the stored call has no result) attaches to the
// run it started, running or finished, instead of starting a second one.
//
// ctx is the call's context. When the calling turn is aborted (the outer run was cancelled),
// the nested run is cancelled and its aborted outcome, partial output included, is the
// result. When the calling agent is only suspended (the worker is stopping), the nested run
// goes on and the retried drive attaches to it again.
func (a *Activities) delegate(actx, ctx context.Context, call subagenttool.DelegateCall) (subagent.Result, error) {
	info := activity.GetInfo(actx)
	c := a.client(actx)
	in := workflows.StartInput{Provider: call.Provider, Request: call.Request, ChildID: NestedChildID(call.Request.Parent.SessionID, call.CallID), Shape: workflows.CurrentShape}
	id := workflows.WorkflowID(in.ChildID)
	opts := subflow.StartWorkflowOptions(id, info.TaskQueue, in)
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	// SDK v1.50 keeps workflow links internal (Nexus only): the parent link is a line of the
	// details, which the Web UI renders as Markdown.
	opts.StaticDetails = delegatedBy(info) + opts.StaticDetails
	log := a.logger(actx, call.Request.Parent.SessionID).With(zap.String("nestedWorkflowId", id), zap.String("callId", call.CallID))

	run, err := c.ExecuteWorkflow(ctx, opts, workflows.WorkflowName, in)
	if err != nil {
		return subagent.Result{}, fmt.Errorf("subagent: start nested run %s: %w", id, err)
	}
	log.Info("nested run started or attached", zap.String("runId", run.GetRunID()))
	var out workflows.Outcome
	err = run.Get(ctx, &out)
	if err != nil && ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), agent.ErrSuspended) {
			log.Info("caller suspended: the nested run goes on for the retried drive")
			return subagent.Result{}, ctx.Err()
		}
		log.Info("caller aborted: cancelling the nested run")
		return a.cancelNested(c, run)
	}
	return a.nestedResult(ctx, id, out, err)
}

// cancelNested cancels a nested run and returns its aborted outcome's result.
func (a *Activities) cancelNested(c client.Client, run client.WorkflowRun) (subagent.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), NestedCancelWait)
	defer cancel()
	aborted := subagent.Result{StopReason: subagent.StopAborted}
	if err := c.CancelWorkflow(ctx, run.GetID(), run.GetRunID()); err != nil {
		a.log.Warn("cancel nested run", zap.String("nestedWorkflowId", run.GetID()), zap.Error(err))
		return aborted, nil
	}
	var out workflows.Outcome
	gerr := run.Get(ctx, &out)
	res, err := a.nestedResult(ctx, run.GetID(), out, gerr)
	if err != nil {
		a.log.Warn("wait for cancelled nested run", zap.String("nestedWorkflowId", run.GetID()), zap.Error(err))
		return aborted, nil
	}
	return res, nil
}

// nestedResult maps how a nested run ended to the subagent tool's result: its outcome, the
// outcome of a Canceled run (its details), or the rejection with its exact message. A result
// stored by reference is read from the session store.
func (a *Activities) nestedResult(ctx context.Context, workflowID string, out workflows.Outcome, err error) (subagent.Result, error) {
	if err == nil {
		return a.inlineResult(ctx, out)
	}
	if ve := workflows.Rejection(err); ve != nil {
		return subagent.Result{}, ve
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		var details workflows.Outcome
		if canceled.HasDetails() && canceled.Details(&details) == nil {
			return a.inlineResult(ctx, details)
		}
		return subagent.Result{StopReason: subagent.StopAborted}, nil
	}
	return subagent.Result{}, fmt.Errorf("subagent: nested run %s: %w", workflowID, err)
}

// delegatedBy is the details line naming the workflow whose child delegated, as a link into
// the Web UI.
func delegatedBy(info activity.Info) string {
	wf := info.WorkflowExecution
	return fmt.Sprintf("**delegated by**: [%s](/namespaces/%s/workflows/%s/%s/history)  \n",
		wf.ID, info.WorkflowNamespace, wf.ID, wf.RunID)
}
