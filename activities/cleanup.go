package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/workflows"
)

// TypeNoRetainer is the non-retryable error type of a cleanup on a worker whose store
// records no owners.
const TypeNoRetainer = "store-keeps-no-owners"

// own records the activity's workflow as an owner of the sessions ids before it writes them
// (docs/durability.md), so the retention cleanup keeps them while Temporal keeps the run,
// and removes them once it does not. A store that records no owners (session.Retainer) keeps
// its sessions forever; an invalid or empty id is left to the write that follows, which
// rejects it.
func (a *Activities) own(ctx context.Context, ids ...string) error {
	r, ok := a.store.(session.Retainer)
	if !ok || !activity.IsActivity(ctx) { // called as a plain function: no workflow owns it
		return nil
	}
	owner := activity.GetInfo(ctx).WorkflowExecution.ID
	for _, id := range ids {
		if session.ValidateID(id) != nil {
			continue
		}
		if err := r.Own(ctx, id, owner); err != nil {
			return &ownerError{id: id, err: err}
		}
	}
	return nil
}

// ownerError is the error of own: recording an owner of session id failed.
type ownerError struct {
	id  string
	err error
}

func (e *ownerError) Error() string {
	return fmt.Sprintf("activities: record the owner of %s: %v", e.id, e.err)
}

func (e *ownerError) Unwrap() error { return e.err }

// CleanupCutoff returns the retention a cleanup applies (in.OlderThan, else the worker's
// Config.Retention, else the namespace's) and the cutoff now minus it.
func (a *Activities) CleanupCutoff(ctx context.Context, in workflows.CleanupCutoffInput) (workflows.CleanupCutoff, error) {
	out := workflows.CleanupCutoff{Retention: in.OlderThan, Source: "older-than"}
	if out.Retention <= 0 {
		out.Retention, out.Source = a.retention, "worker"
	}
	if out.Retention <= 0 {
		ns := activity.GetInfo(ctx).WorkflowNamespace
		desc, err := a.client(ctx).WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		if err != nil {
			return out, fmt.Errorf("activities: read the retention of namespace %s: %w", ns, err)
		}
		out.Retention, out.Source = desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), "namespace"
	}
	if out.Retention > 0 {
		out.Cutoff = time.Now().UTC().Add(-out.Retention)
	}
	return out, nil
}

// CleanupPage checks one page of old sessions with Temporal and removes those no kept run
// owns (see workflows.Cleanup). An owner is gone when Temporal no longer knows its workflow
// id, or its latest run closed before the cutoff; a running owner, or one closed since,
// keeps the session. It heartbeats once per session, and counts what it removed in the
// worker's metrics: subflow_cleanup_removed_items and subflow_cleanup_removed_bytes, by kind.
func (a *Activities) CleanupPage(ctx context.Context, in workflows.CleanupPageInput) (workflows.CleanupPageOutput, error) {
	var out workflows.CleanupPageOutput
	r, ok := a.store.(session.Retainer)
	if !ok {
		return out, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("activities: cleanup: the session store %T records no owners", a.store), TypeNoRetainer, nil)
	}
	page, err := r.Owned(ctx, session.OwnedQuery{After: in.After, Before: in.Cutoff, Limit: in.Limit})
	if err != nil {
		return out, fmt.Errorf("activities: cleanup: %w", err)
	}
	log := a.log.With(zap.String("workflowID", activity.GetInfo(ctx).WorkflowExecution.ID))
	kept := map[string]bool{} // owner → Temporal keeps it, for the owners many sessions share
	for _, o := range page {
		activity.RecordHeartbeat(ctx, o.ID)
		out.Checked++
		keep := false
		for _, owner := range o.Owners {
			k, seen := kept[owner]
			if !seen {
				if k, err = a.ownerKept(ctx, owner, in.Cutoff); err != nil {
					return out, err
				}
				kept[owner] = k
			}
			if k {
				keep = true
				break
			}
		}
		if !keep && !in.DryRun {
			removed, err := r.RemoveOwned(ctx, o.ID, o.Touched)
			if err != nil {
				return out, fmt.Errorf("activities: cleanup: %w", err)
			}
			keep = !removed
		}
		if keep {
			out.Kept++
			continue
		}
		kind := storedKind(o.ID)
		out.Add(workflows.CleanupCounts{Removed: map[string]workflows.CleanupKind{kind: {Items: 1, Bytes: o.Size}}})
		if !in.DryRun {
			m := activity.GetMetricsHandler(ctx).WithTags(map[string]string{"kind": kind})
			m.Counter("subflow_cleanup_removed_items").Inc(1)
			m.Counter("subflow_cleanup_removed_bytes").Inc(o.Size)
			log.Debug("removed", zap.String("session", o.ID), zap.Int64("bytes", o.Size), zap.Strings("owners", o.Owners))
		}
	}
	if len(page) < in.Limit {
		out.Done = true
	} else {
		out.Next = page[len(page)-1].ID
	}
	return out, nil
}

// ownerKept reports whether Temporal still keeps the workflow id: running, or closed at or
// after cutoff.
func (a *Activities) ownerKept(ctx context.Context, id string, cutoff time.Time) (bool, error) {
	desc, err := a.client(ctx).DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("activities: cleanup: describe owner %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetCloseTime() == nil {
		return true, nil
	}
	return !info.GetCloseTime().AsTime().Before(cutoff), nil
}

// storedKind names what a session id holds, for the cleanup's counts.
func storedKind(id string) string {
	switch {
	case strings.HasPrefix(id, "payload-"):
		return "payload"
	case strings.HasPrefix(id, "request-"):
		return "request"
	case strings.HasPrefix(id, batchPagePrefix):
		return "batch-page"
	default:
		return "session"
	}
}
