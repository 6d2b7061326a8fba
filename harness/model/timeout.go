package model

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of OpenAIOptions' timeouts.
const (
	// DefaultRequestTimeout bounds one streaming request from send to its last chunk.
	DefaultRequestTimeout = 10 * time.Minute
	// DefaultStreamIdleTimeout bounds the wait for the response headers and, after them, for
	// each next chunk of the stream.
	DefaultStreamIdleTimeout = 60 * time.Second
)

// TimeoutError is a model request that took too long: no chunk for the stream-idle timeout,
// or the whole request past the request timeout. It is retryable (IsRetryable): the same
// request may well succeed later, so a driver resumes the turn rather than failing it.
type TimeoutError struct {
	Provider string
	Model    string
	// Idle is true for the stream-idle timeout, false for the request timeout.
	Idle    bool
	Timeout time.Duration
}

// Error names the provider, the model and which limit was hit.
func (e *TimeoutError) Error() string {
	if e.Idle {
		return fmt.Sprintf("%s model %q: timed out: no response data for %s (stream-idle timeout)", e.Provider, e.Model, e.Timeout)
	}
	return fmt.Sprintf("%s model %q: timed out: the request took longer than %s (request timeout)", e.Provider, e.Model, e.Timeout)
}

// Retryable reports true: a timeout is a transient failure.
func (e *TimeoutError) Retryable() bool { return true }

// IsRetryable reports whether err, or an error it wraps, says it is transient with a
// `Retryable() bool` method returning true: the request may be sent again later.
func IsRetryable(err error) bool {
	var r interface{ Retryable() bool }
	return errors.As(err, &r) && r.Retryable()
}

// watchdog bounds one request: the context it returns is cancelled with a *TimeoutError as
// its cause when the request timeout passes, or when the idle timeout passes without a call
// to alive. A zero duration disables that limit.
type watchdog struct {
	cancel context.CancelCauseFunc
	idle   time.Duration
	mu     sync.Mutex
	timer  *time.Timer // idle timer
	total  *time.Timer
}

func newWatchdog(ctx context.Context, provider, model string, request, idle time.Duration) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{cancel: cancel, idle: idle}
	if request > 0 {
		w.total = time.AfterFunc(request, func() {
			cancel(&TimeoutError{Provider: provider, Model: model, Timeout: request})
		})
	}
	if idle > 0 {
		w.timer = time.AfterFunc(idle, func() {
			cancel(&TimeoutError{Provider: provider, Model: model, Idle: true, Timeout: idle})
		})
	}
	return ctx, w
}

// alive restarts the idle timer: data arrived.
func (w *watchdog) alive() {
	if w.timer != nil {
		w.timer.Reset(w.idle)
	}
}

// stop releases the timers and the context.
func (w *watchdog) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.total != nil {
		w.total.Stop()
	}
	w.cancel(nil)
}

// timeout returns the *TimeoutError that ended ctx (from newWatchdog), or nil.
func timeout(ctx context.Context) error {
	var te *TimeoutError
	if errors.As(context.Cause(ctx), &te) {
		return te
	}
	return nil
}
