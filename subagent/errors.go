package subagent

import (
	"context"
	"fmt"
)

// Rules of ValidationError. They are stable: Temporal uses them as non-retryable error types.
const (
	RuleUnknownProvider       = "unknown-provider"
	RuleUnsupportedCapability = "unsupported-capability"
	RuleInvalidMaxDepth       = "invalid-max-depth"
	RuleUnsupportedSchema     = "unsupported-schema"
	RuleInvalidStoredDepth    = "invalid-stored-depth"
	RuleInvalidRuntimeDepth   = "invalid-runtime-depth"
	RuleDepthOverflow         = "depth-overflow"
	RuleDepthExceeded         = "depth-exceeded"
	RuleInvalidMaxDepthConfig = "invalid-max-depth-setting"
	RuleDepthLimitUnsupported = "depth-limit-unsupported"
	RuleEmptyCwd              = "empty-cwd"
	RuleMissingCwd            = "missing-cwd"
	RuleRelativeCwd           = "relative-cwd"
	RuleInaccessibleCwd       = "inaccessible-cwd"
	// Field rules of CheckFields: a request the server or a provider could only refuse
	// later, or would silently change.
	RuleMissingPrompt    = "missing-prompt"
	RuleUnsupportedBlock = "unsupported-block"
	RuleInvalidLabel     = "invalid-label"
	RuleInvalidTokens    = "invalid-token-limit"
	RuleUnknownModel     = "unknown-model-provider"
)

// Rules returns every rule of this package, in the order declared above: with the rules of
// package workflows, the ApplicationError types Temporal never retries
// (workflows.RejectionRules). A test keeps it complete.
func Rules() []string {
	return []string{
		RuleUnknownProvider,
		RuleUnsupportedCapability,
		RuleInvalidMaxDepth,
		RuleUnsupportedSchema,
		RuleInvalidStoredDepth,
		RuleInvalidRuntimeDepth,
		RuleDepthOverflow,
		RuleDepthExceeded,
		RuleInvalidMaxDepthConfig,
		RuleDepthLimitUnsupported,
		RuleEmptyCwd,
		RuleMissingCwd,
		RuleRelativeCwd,
		RuleInaccessibleCwd,
		RuleMissingPrompt,
		RuleUnsupportedBlock,
		RuleInvalidLabel,
		RuleInvalidTokens,
		RuleUnknownModel,
	}
}

// ValidationError is a request or configuration rejected by a rule of this package, before
// anything was created. Error returns Message unchanged (it is user- and model-visible);
// Rule names the rule that failed.
type ValidationError struct {
	Rule    string
	Message string
}

func (e *ValidationError) Error() string { return e.Message }

// Rejectf returns the rejection of rule with the message format and a make.
func Rejectf(rule, format string, a ...any) *ValidationError {
	return &ValidationError{Rule: rule, Message: fmt.Sprintf(format, a...)}
}

// DepthError reports a child depth past the request's maxDepth (contract R-5). It unwraps to a
// *ValidationError with Rule RuleDepthExceeded and the same message, so callers that only
// care whether a start check failed need not know this type.
type DepthError struct {
	Attempted int64 // the child depth the delegation would have had
	Max       int64 // the request's maxDepth
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("subagent depth %d exceeds maxDepth %d", e.Attempted, e.Max)
}

// Rule returns RuleDepthExceeded.
func (e *DepthError) Rule() string { return RuleDepthExceeded }

// Unwrap returns the equivalent *ValidationError.
func (e *DepthError) Unwrap() error {
	return &ValidationError{Rule: RuleDepthExceeded, Message: e.Error()}
}

// AbortedBeforeStart returns the error of a delegation whose caller gave up before its child
// started: its message is sentinel's (the contract's exact words), and errors.Is matches both
// sentinel and ctx's own error, context.Canceled or context.DeadlineExceeded, so a Go caller
// tells its own cancel from a failure with the standard idiom. ctx must be done.
func AbortedBeforeStart(ctx context.Context, sentinel error) error {
	return &abortedError{sentinel: sentinel, cause: ctx.Err()}
}

type abortedError struct{ sentinel, cause error }

func (e *abortedError) Error() string   { return e.sentinel.Error() }
func (e *abortedError) Unwrap() []error { return []error{e.sentinel, e.cause} }
