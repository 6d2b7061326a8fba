package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	subflow "github.com/subflow-dev/subflow/client"
	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// NestedCancelWait bounds how long a cancelled subagent tool call waits for its nested run to
// end Canceled and hand over its partial output.
const NestedCancelWait = 30 * time.Second

// nestedNamespace seeds the child ids of nested runs (see NestedChildID).
var nestedNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/subflow-dev/subflow/nested"))

// NestedChildID returns the child id of the nested run that the subagent tool call callID of
// session sessionID starts; its workflow id is workflows.WorkflowID of it. It is a UUID
// (version 5) that depends on nothing else, so the same call, run again by a retried drive,
// names the same child and the same workflow.
func NestedChildID(sessionID, callID string) string {
	return uuid.NewSHA1(nestedNamespace, []byte(sessionID+"\x00"+callID)).String()
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
// actx: its calls delegate through nested StartSubagent runs on this worker's task queue.
func (a *Activities) subagentTool(actx context.Context) (tools.Tool, error) {
	return subagenttool.New(subagenttool.Options{
		DefaultProvider: a.nestedProvider,
		MaxDepth:        a.nestedMaxDepth,
		Capabilities:    subagent.ProviderCapabilities,
		Delegate: func(ctx context.Context, call subagenttool.DelegateCall) (subagent.Result, error) {
			return a.delegate(actx, ctx, call)
		},
	})
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
	in := workflows.StartInput{Provider: call.Provider, Request: call.Request, ChildID: NestedChildID(call.Request.Parent.SessionID, call.CallID)}
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
	res, err := a.nestedResult(ctx, run.GetID(), out, run.Get(ctx, &out))
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
