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
	"go.temporal.io/sdk/client"
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
// keeps the session. It counts what it removed in the worker's metrics:
// subflow_cleanup_removed_items and subflow_cleanup_removed_bytes, by kind.
//
// The page's outcome counts what the page removed whichever attempt removed it: once the
// owners are checked, the attempt records its plan (what it will remove, and the counts so
// far) as the activity's heartbeat details, synchronously, before it removes anything. A
// retry — its worker was killed mid-page — finds the plan and carries it out instead of
// listing the page again, counting a planned session that is gone as removed by the attempt
// before. Listing again would not see those sessions, and the report would undercount.
func (a *Activities) CleanupPage(ctx context.Context, in workflows.CleanupPageInput) (workflows.CleanupPageOutput, error) {
	r, ok := a.store.(session.Retainer)
	if !ok {
		return workflows.CleanupPageOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("activities: cleanup: the session store %T records no owners", a.store), TypeNoRetainer, nil)
	}
	hb, err := a.newSyncHeartbeat(ctx)
	if err != nil {
		return workflows.CleanupPageOutput{}, err
	}
	var plan cleanupPlan
	recovered := activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &plan) == nil && plan.Planned
	if !recovered {
		if plan, err = a.planCleanupPage(ctx, r, in, hb); err != nil {
			return workflows.CleanupPageOutput{}, err
		}
		if !in.DryRun && len(plan.Remove) > 0 {
			if err := hb.beat(plan, true); err != nil {
				return workflows.CleanupPageOutput{}, err
			}
		}
	}
	out := workflows.CleanupPageOutput{Next: plan.Next, Done: plan.Done}
	out.Checked, out.Kept = plan.Checked, plan.Kept
	log := a.log.With(zap.String("workflowID", activity.GetInfo(ctx).WorkflowExecution.ID))
	for _, o := range plan.Remove {
		if err := hb.beat(plan, false); err != nil {
			return out, err
		}
		kind := storedKind(o.ID)
		if !in.DryRun {
			removed, err := r.RemoveOwned(ctx, o.ID, o.Touched)
			if err != nil {
				return out, fmt.Errorf("activities: cleanup: %w", err)
			}
			if !removed {
				gone, err := a.gone(ctx, o.ID)
				if err != nil {
					return out, err
				}
				if !recovered || !gone {
					// A run started to use it since it was listed (or, on a first attempt,
					// another cleanup took it): not this page's removal.
					out.Kept++
					continue
				}
				// Removed by the attempt before this one, which may have died before
				// counting it in its metrics; the report counts it here.
				out.Add(workflows.CleanupCounts{Removed: map[string]workflows.CleanupKind{kind: {Items: 1, Bytes: o.Size}}})
				continue
			}
			m := activity.GetMetricsHandler(ctx).WithTags(map[string]string{"kind": kind})
			m.Counter("subflow_cleanup_removed_items").Inc(1)
			m.Counter("subflow_cleanup_removed_bytes").Inc(o.Size)
			log.Debug("removed", zap.String("session", o.ID), zap.Int64("bytes", o.Size))
		}
		out.Add(workflows.CleanupCounts{Removed: map[string]workflows.CleanupKind{kind: {Items: 1, Bytes: o.Size}}})
	}
	return out, nil
}

// cleanupPlan is what a CleanupPage attempt decided for its page once it checked the owners:
// the heartbeat details a retry of the page resumes from.
type cleanupPlan struct {
	Planned bool             `json:"planned"`
	Remove  []plannedRemoval `json:"remove,omitempty"`
	Checked int              `json:"checked"`
	Kept    int              `json:"kept"`
	Next    string           `json:"next,omitempty"`
	Done    bool             `json:"done,omitempty"`
}

// plannedRemoval is a session of a page that no kept run owns, as the page listed it.
type plannedRemoval struct {
	ID      string    `json:"id"`
	Touched time.Time `json:"touched"`
	Size    int64     `json:"size"`
}

// planCleanupPage lists the page of in and checks the owners of each session with Temporal.
func (a *Activities) planCleanupPage(ctx context.Context, r session.Retainer, in workflows.CleanupPageInput, hb *syncHeartbeat) (cleanupPlan, error) {
	plan := cleanupPlan{Planned: true}
	page, err := r.Owned(ctx, session.OwnedQuery{After: in.After, Before: in.Cutoff, Limit: in.Limit})
	if err != nil {
		return plan, fmt.Errorf("activities: cleanup: %w", err)
	}
	kept := map[string]bool{} // owner → Temporal keeps it, for the owners many sessions share
	for _, o := range page {
		// Not the plan yet: a retry from here lists the page again.
		if err := hb.beat(cleanupPlan{}, false); err != nil {
			return plan, err
		}
		plan.Checked++
		keep := false
		for _, owner := range o.Owners {
			k, seen := kept[owner]
			if !seen {
				if k, err = a.ownerKept(ctx, owner, in.Cutoff); err != nil {
					return plan, err
				}
				kept[owner] = k
			}
			if k {
				keep = true
				break
			}
		}
		if keep {
			plan.Kept++
			continue
		}
		plan.Remove = append(plan.Remove, plannedRemoval{ID: o.ID, Touched: o.Touched, Size: o.Size})
	}
	if len(page) < in.Limit {
		plan.Done = true
	} else {
		plan.Next = page[len(page)-1].ID
	}
	return plan, nil
}

// gone reports whether the store no longer holds session id.
func (a *Activities) gone(ctx context.Context, id string) (bool, error) {
	_, _, err := a.store.Load(ctx, id)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("activities: cleanup: %w", err)
	}
	return false, nil
}

// syncHeartbeat sends an activity's heartbeats itself, through the client, each one
// synchronously: the SDK's own RecordHeartbeat batches details and sends them later, and a
// batched older detail could replace a plan a retry must find.
type syncHeartbeat struct {
	ctx   context.Context
	c     client.Client
	token []byte
	every time.Duration
	last  time.Time
}

func (a *Activities) newSyncHeartbeat(ctx context.Context) (*syncHeartbeat, error) {
	c := a.client(ctx)
	if c == nil {
		return nil, errors.New("activities: cleanup: no Temporal client in the activity context")
	}
	return &syncHeartbeat{ctx: ctx, c: c, token: activity.GetInfo(ctx).TaskToken, every: a.interval}, nil
}

// beat records details as the heartbeat, at once when force is set, else at most once per
// interval.
func (h *syncHeartbeat) beat(details any, force bool) error {
	if !force && time.Since(h.last) < h.every {
		return nil
	}
	if err := h.c.RecordActivityHeartbeat(h.ctx, h.token, details); err != nil {
		return fmt.Errorf("activities: cleanup: heartbeat: %w", err)
	}
	h.last = time.Now()
	return nil
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
