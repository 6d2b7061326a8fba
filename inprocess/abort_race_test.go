package inprocess

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// failsOnAbort is a model whose request fails, not as cancelled, as soon as the run's abort
// signal is given: a turn that ends `error` at the very moment the cancel lands.
type failsOnAbort struct{ abort context.Context }

func (m failsOnAbort) Stream(ctx context.Context, _ model.Request, _ func(string)) (model.Response, error) {
	select {
	case <-m.abort.Done():
		return model.Response{}, errors.New("upstream failure")
	case <-ctx.Done():
		return model.Response{}, ctx.Err()
	}
}

// TestCancelLandingAsTheTurnEndsIsAborted: a cancel of Start's ctx registered before the
// result is read settles the run aborted, however late the ctx's listener goroutine runs.
// The listener is held back here until the result is read, the schedule that made the same
// cancel give `error` before.
func TestCancelLandingAsTheTurnEndsIsAborted(t *testing.T) {
	release := make(chan struct{})
	orig := afterFunc
	afterFunc = func(ctx context.Context, f func()) func() bool {
		return orig(ctx, func() { <-release; f() })
	}
	t.Cleanup(func() { afterFunc = orig })

	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	host := f.hostWith(t, failsOnAbort{abort: ctx})
	parent := f.parent(t, session.Header{Route: route("any")})
	r, err := host.Start(ctx, request(parent, "go"), StartOptions{})
	require.NoError(t, err)
	cancel()
	res, err := r.Result(context.Background())
	close(release)
	require.NoError(t, err)
	assert.Equal(t, subagent.StopAborted, res.StopReason)
	require.NoError(t, r.Dispose(context.Background()))
}
