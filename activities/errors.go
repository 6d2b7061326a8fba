package activities

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/workflows"
)

// Types of the non-retryable ApplicationErrors this package adds to the rules of package
// subagent. Like those, they reject a request before anything is published.
const (
	// RuleUnknownTool: a tool filter names a tool the worker does not have (SPEC R-25).
	RuleUnknownTool = "unknown-tool"
	// RuleParentNotFound: the request's parent session is not in the session store.
	RuleParentNotFound = "parent-not-found"
	// RuleSessionConflict: a session with the requested id exists with another header.
	RuleSessionConflict = "session-conflict"
	// RuleNoSDKProvider: the worker has no sdk child command configured.
	RuleNoSDKProvider = "no-sdk-provider"
	// RuleInvalidSandboxMode: the parent's sandbox mode is not a known one, so it cannot be
	// delegated (tools.CheckSandboxMode).
	RuleInvalidSandboxMode = "invalid-sandbox-mode"
)

// TypeWorkerStopping is the type of the retryable ApplicationError Drive and RunSDKChild
// return when their worker stops under them: the retry runs on another worker.
const TypeWorkerStopping = "worker-stopping"

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
	case errors.Is(err, session.ErrHeaderMismatch):
		return temporal.NewNonRetryableApplicationError(err.Error(), RuleSessionConflict, nil)
	}
	return workflows.ToApplicationError(err)
}

// workerStopping is the retryable error of an activity whose worker stopped.
func workerStopping(what string) error {
	return temporal.NewApplicationError(what+": the worker is stopping; the retry resumes it elsewhere",
		TypeWorkerStopping)
}
