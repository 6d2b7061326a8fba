package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/workflows"
)

// Types of the non-retryable ApplicationErrors this package adds to the rules of package
// subagent. Like those, they reject a request before anything is published; they are
// defined in package workflows, whose retry policies and Start must know them.
const (
	RuleUnknownTool        = workflows.RuleUnknownTool
	RuleParentNotFound     = workflows.RuleParentNotFound
	RuleInvalidSessionID   = workflows.RuleInvalidSessionID
	RuleSessionConflict    = workflows.RuleSessionConflict
	RuleNoSDKProvider      = workflows.RuleNoSDKProvider
	RuleInvalidSandboxMode = workflows.RuleInvalidSandboxMode
)

// TypeWorkerStopping is the type of the retryable ApplicationError Drive and RunSDKChild
// return when their worker stops under them: the retry runs on another worker.
const TypeWorkerStopping = "worker-stopping"

// TypeSDKStart is the type of the non-retryable ApplicationError RunSDKChild returns when its
// child runtime did not start: it exited, stayed silent or answered garbage before the
// initialize handshake completed, or its command cannot be run. Only a spawn that failed for
// want of a resource is retried (sdkproc.SpawnError.Transient).
const TypeSDKStart = "sdk-start"

// rejection returns err as the workflow must see it: rules and permanent faults become
// non-retryable ApplicationErrors carrying the exact message; anything else is returned
// unchanged and retried.
func rejection(err error) error {
	var unknownTool *tools.UnknownToolError
	var unknownMode *tools.UnknownSandboxModeError
	switch {
	case errors.As(err, &unknownTool):
		return temporal.NewNonRetryableApplicationError(unknownTool.Error(), RuleUnknownTool, nil)
	case errors.As(err, &unknownMode):
		return temporal.NewNonRetryableApplicationError(err.Error(), RuleInvalidSandboxMode, nil)
	case errors.Is(err, session.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(err.Error(), RuleParentNotFound, nil)
	case errors.Is(err, session.ErrInvalidID):
		return temporal.NewNonRetryableApplicationError(err.Error(), RuleInvalidSessionID, nil)
	case errors.Is(err, inprocess.ErrOwnedElsewhere):
		return temporal.NewNonRetryableApplicationError(err.Error(), RuleChildIDTaken, nil)
	case errors.Is(err, session.ErrHeaderMismatch):
		return temporal.NewNonRetryableApplicationError(err.Error(), RuleSessionConflict, nil)
	}
	return workflows.ToApplicationError(err)
}

// parentRejection returns the rejection of a request whose parent session cannot be
// loaded — absent, or an id no store accepts — with a message naming the parent, or nil
// when err is another failure.
func parentRejection(parentID string, err error) error {
	switch {
	case errors.Is(err, session.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("subagent parent session %q not found", parentID), RuleParentNotFound, nil)
	case errors.Is(err, session.ErrInvalidID):
		if verr := session.ValidateID(parentID); verr != nil {
			err = verr // without the store's wrapping
		}
		return temporal.NewNonRetryableApplicationError("subagent parent session: "+err.Error(), RuleInvalidSessionID, nil)
	}
	return nil
}

// workerStopping is the retryable error of an activity whose worker stopped.
func workerStopping(what string) error {
	return temporal.NewApplicationError(what+": the worker is stopping; the retry resumes it elsewhere",
		TypeWorkerStopping)
}
