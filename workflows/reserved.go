package workflows

import (
	"strings"
	"unicode/utf8"

	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/subagent"
)

// ReservedIDPrefix starts every workflow id subflow owns: the admission limiters
// (AdmissionWorkflowID) and every other workflow subflow itself starts under a fixed id
// (cleanup, payload fetches). User runs never get such an id (CheckUserWorkflowID): one
// could otherwise take a limiter's id and stall every run of its provider
// (docs/temporal.md).
const ReservedIDPrefix = "subflow-"

// MaxWorkflowIDLength is the longest workflow id a Temporal server accepts by default (its
// dynamic config limit.maxIDLength); a longer id is refused by the starter before anything
// starts, rather than by the server.
const MaxWorkflowIDLength = 1000

// IsReservedID reports whether id lies in subflow's own namespace of workflow ids.
func IsReservedID(id string) bool { return strings.HasPrefix(id, ReservedIDPrefix) }

// CheckUserWorkflowID rejects, with a *subagent.ValidationError, a workflow id a user run
// may not take: one in subflow's namespace (ReservedIDPrefix), one longer than
// MaxWorkflowIDLength bytes, or one that is not UTF-8. "" (choose one) passes.
func CheckUserWorkflowID(id string) error {
	switch {
	case IsReservedID(id):
		return subagent.Rejectf(RuleReservedID, "workflow id %q is reserved: ids starting with %q belong to subflow itself (admission, cleanup, payload fetches)",
			clip(id), ReservedIDPrefix)
	case len(id) > MaxWorkflowIDLength:
		return subagent.Rejectf(RuleInvalidWorkflowID, "workflow id is %d bytes, over the server's limit of %d: %q",
			len(id), MaxWorkflowIDLength, clip(id))
	case !utf8.ValidString(id):
		return subagent.Rejectf(RuleInvalidWorkflowID, "workflow id %q is not valid UTF-8", clip(id))
	}
	return nil
}

// clip shortens an id for a message.
func clip(id string) string {
	const max = 80
	if len(id) <= max {
		return id
	}
	return id[:max] + "…"
}

// checkRunID rejects a StartSubagent run started under a reserved id, however it was
// started (a client, the temporal CLI, a user's own workflow), before it publishes anything.
func checkRunID(ctx workflow.Context) error {
	if id := workflow.GetInfo(ctx).WorkflowExecution.ID; IsReservedID(id) {
		return ToApplicationError(CheckUserWorkflowID(id))
	}
	return nil
}
