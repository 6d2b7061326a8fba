package subflow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/worker"
)

// TestQueueVersionsServed: a queue is served when a worker of every version it routes new
// runs to (the current one, the ramping one while it takes a share, unversioned workers when
// there is none) polled it within PollerRecent; workers of another version do not count.
// subflow.Start starts an interactive run on a lane only when it is served.
func TestQueueVersionsServed(t *testing.T) {
	read := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	recent, stale := read.Add(-10*time.Second), read.Add(-PollerRecent-time.Second)
	v1 := worker.WorkerDeploymentVersion{DeploymentName: "subflow", BuildID: "b1"}
	v2 := worker.WorkerDeploymentVersion{DeploymentName: "subflow", BuildID: "b2"}
	var unversioned worker.WorkerDeploymentVersion
	polls := func(at map[worker.WorkerDeploymentVersion]time.Time) QueueVersions {
		return QueueVersions{TaskQueue: "interactive:subflow", Pollers: at, Read: read}
	}
	for _, tc := range []struct {
		name  string
		q     QueueVersions
		serve bool
	}{
		{"unversioned, polled", polls(map[worker.WorkerDeploymentVersion]time.Time{unversioned: recent}), true},
		{"unversioned, no poller", polls(map[worker.WorkerDeploymentVersion]time.Time{}), false},
		{"unversioned, polled long ago", polls(map[worker.WorkerDeploymentVersion]time.Time{unversioned: stale}), false},
		{"unversioned, only a version's workers poll", polls(map[worker.WorkerDeploymentVersion]time.Time{v1: recent}), false},
		{"current polled", func() QueueVersions {
			q := polls(map[worker.WorkerDeploymentVersion]time.Time{v1: recent})
			q.Current = &v1
			return q
		}(), true},
		{"current not polled, the next build polls", func() QueueVersions {
			q := polls(map[worker.WorkerDeploymentVersion]time.Time{v2: recent, unversioned: recent})
			q.Current = &v1
			return q
		}(), false},
		{"ramping not polled", func() QueueVersions {
			q := polls(map[worker.WorkerDeploymentVersion]time.Time{v1: recent})
			q.Current, q.Ramping, q.RampingPercentage = &v1, &v2, 10
			return q
		}(), false},
		{"current and ramping polled", func() QueueVersions {
			q := polls(map[worker.WorkerDeploymentVersion]time.Time{v1: recent, v2: recent})
			q.Current, q.Ramping, q.RampingPercentage = &v1, &v2, 10
			return q
		}(), true},
		{"ramping at 0 % needs no poller", func() QueueVersions {
			q := polls(map[worker.WorkerDeploymentVersion]time.Time{v1: recent})
			q.Current, q.Ramping = &v1, &v2
			return q
		}(), true},
		{"ramping to unversioned workers, none polls", func() QueueVersions {
			q := polls(map[worker.WorkerDeploymentVersion]time.Time{v1: recent})
			q.Current, q.RampingPercentage = &v1, 50
			return q
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.serve, tc.q.Served())
		})
	}
}
