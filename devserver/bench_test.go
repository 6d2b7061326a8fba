package devserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// roundTripActivities is how many activities benchWorkflow runs in sequence, the shape of a
// short subflow turn.
const roundTripActivities = 3

func benchActivity(context.Context) error { return nil }

func benchWorkflow(ctx workflow.Context, n int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	for range n {
		if err := workflow.ExecuteActivity(ctx, benchActivity).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkActivityRoundTrip measures what the server adds to a run: start a workflow of
// roundTripActivities empty activities on an in-memory server and wait for its result. Each
// workflow task dispatch and each result wait goes through the settings of dynamicConfig.
// It reports p50, p99 and max latency in milliseconds:
//
//	go test -run '^$' -bench ActivityRoundTrip -benchtime 100x ./devserver/
func BenchmarkActivityRoundTrip(b *testing.B) {
	ctx := context.Background()
	s, err := Start(ctx, Options{UIPort: NoUI})
	require.NoError(b, err)
	defer s.Stop()
	c, err := s.NewClient(ctx)
	require.NoError(b, err)
	defer c.Close()
	w := worker.New(c, "bench", worker.Options{})
	w.RegisterWorkflow(benchWorkflow)
	w.RegisterActivity(benchActivity)
	require.NoError(b, w.Start())
	defer w.Stop()

	var lat []time.Duration
	for b.Loop() {
		begin := time.Now()
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "bench"}, benchWorkflow, roundTripActivities)
		require.NoError(b, err)
		require.NoError(b, run.Get(ctx, nil))
		lat = append(lat, time.Since(begin))
	}
	slices.Sort(lat)
	at := func(p int) float64 {
		return float64(lat[min(len(lat)-1, len(lat)*p/100)].Microseconds()) / 1000
	}
	b.ReportMetric(at(50), "p50-ms")
	b.ReportMetric(at(99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
