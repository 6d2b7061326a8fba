package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/subagent"
)

// RunOutcome reads how a StartSubagent run ended from what waiting for it returned: the Get
// of a child workflow future or of a client's workflow run, or of the activity that ran an
// sdk child. It is the one reading of a run's end for the workflows, the activities, the
// client and the starter:
//
//   - completed (err nil): out and nil;
//   - Canceled (contract R-72): the aborted Outcome the *temporal.CanceledError carries as its
//     details, with StopReason aborted when they name none, or an Outcome holding only
//     StopReason aborted when there are no details or they do not decode; the error returned
//     is the *temporal.CanceledError (err, unwrapped);
//   - rejected by a rule: Outcome{} and the *subagent.ValidationError of Rejection (the
//     exact contract message, the rule);
//   - anything else: Outcome{} and err unchanged.
//
// It does no I/O: a result stored by reference (Outcome.ResultRef) stays a reference.
func RunOutcome(out Outcome, err error) (Outcome, error) {
	if err == nil {
		return out, nil
	}
	if ve := Rejection(err); ve != nil {
		return Outcome{}, ve
	}
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		return Outcome{}, err
	}
	out, _ = CanceledOutcome(canceled)
	if out.Result.StopReason == "" {
		out.Result.StopReason = subagent.StopAborted
	}
	return out, canceled
}

// CanceledOutcome returns the Outcome err carries as the details of a *temporal.CanceledError
// (in its chain), and whether it carries one that decodes. A cancelled StartSubagent run and
// a cancelled RunSDKChild activity end with their aborted Outcome as those details.
func CanceledOutcome(err error) (Outcome, bool) {
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) || !canceled.HasDetails() {
		return Outcome{}, false
	}
	var out Outcome
	if canceled.Details(&out) != nil {
		return Outcome{}, false
	}
	return out, true
}

// BatchOutcome reads how a Batch run ended from what waiting for it returned, as RunOutcome
// does for a run: the summary it completed with, or the BatchSummary a Canceled batch
// carries as its details, with the error decoding them (nil when they decode). Any other
// error is returned with sum unchanged.
func BatchOutcome(sum BatchSummary, err error) (BatchSummary, error) {
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		err = canceled.Details(&sum)
	}
	return sum, err
}
