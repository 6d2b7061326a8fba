package workflows

import (
	"errors"
	"slices"

	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/subagent"
)

// Rules StartSubagent, its activities and its starters reject a request with, before
// anything is published, beside the rules of package subagent (subagent.Rules). They are
// declared here, and listed once in rules, so that retry policies never retry them and
// callers of Start recognise every one of them as a rejection (exit 2 of `starter run`).
// docs/json.md gives each one's message; a test keeps the list, the declarations and that
// table in step.
const (
	// RuleMissingParent: the request has neither a parent session nor a root session to
	// create.
	RuleMissingParent = "missing-parent"
	// RuleUnknownTool: a tool filter names a tool the worker does not have (contract R-25).
	RuleUnknownTool = "unknown-tool"
	// RuleParentNotFound: the request's parent session is not in the session store.
	RuleParentNotFound = "parent-not-found"
	// RuleInvalidSessionID: the request's parent session id cannot name a session.
	RuleInvalidSessionID = "invalid-session-id"
	// RuleSessionConflict: a session with the requested id exists with another header.
	RuleSessionConflict = "session-conflict"
	// RuleNoSDKProvider: the worker has no sdk child command configured.
	RuleNoSDKProvider = "no-sdk-provider"
	// RuleInvalidSandboxMode: the parent's sandbox mode is not a known one, so it cannot be
	// delegated (tools.CheckSandboxMode).
	RuleInvalidSandboxMode = "invalid-sandbox-mode"
	// RuleReservedID: CheckUserWorkflowID refuses a workflow id in subflow's own namespace
	// (ReservedIDPrefix).
	RuleReservedID = "reserved-workflow-id"
	// RuleInvalidWorkflowID: CheckUserWorkflowID refuses a workflow id over
	// MaxWorkflowIDLength bytes or not UTF-8.
	RuleInvalidWorkflowID = "invalid-workflow-id"
	// RuleOutsideWorkspace: the run's cwd, resolved, lies outside every workspace root its
	// worker serves (docs/deployment.md).
	RuleOutsideWorkspace = "outside-workspace"
	// RuleInvalidChildID: the input's childId cannot name a session (CheckSessionID).
	RuleInvalidChildID = "invalid-child-id"
	// RuleInvalidTimeout: the input's timeout is given but not positive.
	RuleInvalidTimeout = "invalid-timeout"
	// RuleInvalidAttribute: a value the run carries as a search attribute (its batch, its
	// model) is over the server's limit (subagent.MaxAttributeBytes).
	RuleInvalidAttribute = "invalid-attribute"
	// RuleChildIDTaken: the input's childId names a session another run created: a retry
	// of the same run finds its own session, another run is refused before it writes.
	RuleChildIDTaken = "child-id-taken"
	// RuleDuplicateTaskID: two tasks of a batch name the same workflow id.
	RuleDuplicateTaskID = "duplicate-task-id"
	// RuleInvalidConcurrency: a batch's concurrency is given but below 1.
	RuleInvalidConcurrency = "invalid-concurrency"
	// RuleUnknownTaskQueue: a task queue no worker polls (subflow.CheckTaskQueue).
	RuleUnknownTaskQueue = "unknown-task-queue"
	// RuleBatchIDUsed: a batch with this id already ran (subflow.CheckBatchID): its child
	// ids, seeded by the batch id, are taken.
	RuleBatchIDUsed = "batch-id-used"
)

// rules are the rules of this package, in the order declared above.
var rules = []string{
	RuleMissingParent,
	RuleUnknownTool,
	RuleParentNotFound,
	RuleInvalidSessionID,
	RuleSessionConflict,
	RuleNoSDKProvider,
	RuleInvalidSandboxMode,
	RuleReservedID,
	RuleInvalidWorkflowID,
	RuleOutsideWorkspace,
	RuleInvalidChildID,
	RuleInvalidTimeout,
	RuleInvalidAttribute,
	RuleChildIDTaken,
	RuleDuplicateTaskID,
	RuleInvalidConcurrency,
	RuleUnknownTaskQueue,
	RuleBatchIDUsed,
}

// rejectionTypes are the ApplicationError types retry policies never retry: the rules of
// package subagent, then those of this package.
var rejectionTypes = append(subagent.Rules(), rules...)

// RejectionRules returns the rules of every rejection: the ApplicationError types retry
// policies never retry and Rejection recognises (docs/json.md lists them for callers in
// other languages).
func RejectionRules() []string { return slices.Clone(rejectionTypes) }

// ToApplicationError returns err as Temporal should carry it. A *subagent.ValidationError
// (or an error wrapping one, such as *subagent.DepthError) becomes a non-retryable
// ApplicationError whose Type is the rule and whose message is exactly the validation
// message; any other error is returned unchanged. Activities return their rejections
// through it.
func ToApplicationError(err error) error {
	var ve *subagent.ValidationError
	if errors.As(err, &ve) {
		return temporal.NewNonRetryableApplicationError(ve.Message, ve.Rule, nil)
	}
	return err
}

// asRejection reports whether err (typically an activity error) is a rejection of the
// request, and returns it as a fresh top-level non-retryable ApplicationError with the same
// type and message, so callers see the message unwrapped.
func asRejection(err error) (error, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return nil, false
	}
	if !appErr.NonRetryable() && !slices.Contains(rejectionTypes, appErr.Type()) {
		return nil, false
	}
	return temporal.NewNonRetryableApplicationError(appErr.Message(), appErr.Type(), nil), true
}

// Rejection returns the request rejection err carries — an update failure of Start or the
// failure of a StartSubagent run — as a *subagent.ValidationError with the exact message
// and the rule, or nil when err is no rejection.
func Rejection(err error) *subagent.ValidationError {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !slices.Contains(rejectionTypes, appErr.Type()) {
		return nil
	}
	return &subagent.ValidationError{Rule: appErr.Type(), Message: appErr.Message()}
}
