package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/workflows"
)

// LeaseTTL is the expiry of a drive's session lease, renewed every third of it while the drive
// runs. It equals the drive's heartbeat timeout: a worker frozen or cut off that long has been
// timed out by the server, and the retry elsewhere then finds the lease expired and takes it;
// the stale worker's appends are fenced from that moment on.
const LeaseTTL = workflows.HeartbeatTimeout

// driveLease is a drive's hold on its child's session.
type driveLease struct {
	store session.Store   // what the drive appends through: fenced by the lease
	lost  <-chan struct{} // closed when another holder took the lease over; nil without one
	err   func() error    // why lost
	end   func()
}

// lease takes the session lease of childID when the store grants leases (session.Leaser), so
// a drive still running on a worker that lost contact with Temporal and its retry elsewhere
// never write the same log at once: the drive appends through the returned store, fenced by
// the lease's token. The wait heartbeats (the caller's ticker runs) and ends when ctx ends or
// the worker stops. Without a Leaser, the store is a.store and end does nothing.
func (a *Activities) lease(ctx context.Context, log *zap.Logger, childID string) (driveLease, error) {
	leaser, ok := a.store.(session.Leaser)
	if !ok {
		return driveLease{store: a.store, err: func() error { return nil }, end: func() {}}, nil
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
	l, err := session.TakeLease(waitCtx, leaser, childID, LeaseTTL)
	if err != nil {
		return driveLease{}, err
	}
	log.Info("session lease taken", zap.Int64("fencingToken", l.Token()))
	return driveLease{
		store: l.Store(), lost: l.Lost(), err: l.Err,
		end: func() {
			if err := l.Release(); err != nil {
				log.Error("release session lease", zap.Error(err))
			}
		},
	}, nil
}
