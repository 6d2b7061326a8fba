package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
)

// lease takes the session lease of childID when the store grants leases (session.Leaser), so
// a drive still running on a worker that lost contact with Temporal and its retry elsewhere
// never write the same log at once. The wait heartbeats (the caller's ticker runs) and ends
// when ctx ends or the worker stops. Without a Leaser, release does nothing.
func (a *Activities) lease(ctx context.Context, log *zap.Logger, childID string) (release func(), err error) {
	leaser, ok := a.store.(session.Leaser)
	if !ok {
		return func() {}, nil
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-activity.GetWorkerStopChannel(ctx):
			cancel()
		case <-waitCtx.Done():
		}
	}()
	rel, err := leaser.Lease(waitCtx, childID)
	if err != nil {
		return nil, err
	}
	return func() {
		if err := rel(); err != nil {
			log.Error("release session lease", zap.Error(err))
		}
	}, nil
}
