package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
)

// activityErrorMsg is the line the Temporal SDK logs, at error level, for every activity that
// returns an error (its only exception is a benign ApplicationError, which a cancellation
// cannot be: it must reach the workflow as a cancellation).
const activityErrorMsg = "Activity error."

// QuietCancellations wraps l, a Temporal client's logger (client.Options.Logger), so that the
// SDK's "Activity error." line for an activity that ended by its cancellation
// (context.Canceled, *temporal.CanceledError) is logged at info, not error. A cancelled
// drive is an abort someone asked for, ending the run aborted with its partial answer
// (docs/contract.md R-72): an error line for each would bury the errors that need a look.
func QuietCancellations(l log.Logger) log.Logger {
	if s, ok := l.(log.WithSkipCallers); ok {
		l = s.WithCallerSkip(1) // this wrapper's own frame
	}
	return quietCancellations{l}
}

type quietCancellations struct{ log.Logger }

var (
	_ log.WithLogger      = quietCancellations{}
	_ log.WithSkipCallers = quietCancellations{}
)

func (q quietCancellations) Error(msg string, keyvals ...any) {
	if msg == activityErrorMsg && canceled(keyvals) {
		q.Logger.Info(msg, keyvals...)
		return
	}
	q.Logger.Error(msg, keyvals...)
}

// With returns the wrapped logger's With, still quiet about cancellations.
func (q quietCancellations) With(keyvals ...any) log.Logger {
	return quietCancellations{log.With(q.Logger, keyvals...)}
}

// WithCallerSkip returns the wrapped logger's WithCallerSkip, still quiet about cancellations.
func (q quietCancellations) WithCallerSkip(depth int) log.Logger {
	if s, ok := q.Logger.(log.WithSkipCallers); ok {
		return quietCancellations{s.WithCallerSkip(depth)}
	}
	return q
}

// canceled reports whether keyvals carry an error that is a cancellation.
func canceled(keyvals []any) bool {
	for _, v := range keyvals {
		if err, ok := v.(error); ok {
			var ce *temporal.CanceledError
			if errors.Is(err, context.Canceled) || errors.As(err, &ce) {
				return true
			}
		}
	}
	return false
}
