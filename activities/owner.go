package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/workflows"
)

// RuleChildIDTaken is the rule of a start whose child id names another run's session.
const RuleChildIDTaken = workflows.RuleChildIDTaken

// runOwner is the Owner a session this activity creates records (session.Header.Owner):
// given, the one the workflow named (workflows.RunOwner: its workflow id and first run id,
// which a reset of the run keeps); else its workflow's id and run id. It is "" when called as
// a plain function.
func runOwner(ctx context.Context, given string) string {
	if given != "" {
		return given
	}
	if !activity.IsActivity(ctx) {
		return ""
	}
	we := activity.GetInfo(ctx).WorkflowExecution
	return we.ID + "/" + we.RunID
}

// checkOwner refuses, before anything is written, to create or publish session id for
// childID when the session exists and another run created it (its header's Owner is not
// owner, this run's: runOwner): the run would otherwise take over its output. A retry of the
// same run finds its own owner and passes. what names the session in the message ("its
// session", "its root session <id>").
func (a *Activities) checkOwner(ctx context.Context, owner, childID, id, what string) error {
	if owner == "" || session.ValidateID(id) != nil {
		return nil
	}
	h, _, err := a.store.Load(ctx, id)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("activities: read session %s: %w", id, err)
	case h.Owner == owner:
		return nil
	}
	return takenError(childID, what, h.Owner)
}

// takenError is the rejection of a child id whose session (what) another run created.
func takenError(childID, what, owner string) error {
	by := "another run"
	if owner != "" {
		by = "workflow " + owner
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("subagent childId %q is taken: %s was created by %s; choose another childId", childID, what, by),
		RuleChildIDTaken, nil)
}
