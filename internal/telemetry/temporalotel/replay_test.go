package temporalotel_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/internal/telemetry/temporalotel"
	"github.com/subflow-dev/subflow/workflows"
)

// TestReplayEmitsNoSpans replays recorded StartSubagent histories (completed, nested, sdk,
// cancelled runs) through the tracing interceptor: a replay re-runs the workflow code to its
// end, and must not emit its RunWorkflow or HandleUpdate spans again (docs/tracing.md). The
// stock interceptor emits both.
func TestReplayEmitsNoSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	ic, err := temporalotel.NewInterceptor()
	require.NoError(t, err)

	var files []string
	for _, pattern := range []string{"spawn-*.json", "sdk-*.json", "fork-*.json"} {
		found, err := filepath.Glob(filepath.Join("..", "..", "..", "workflows", "testdata", pattern))
		require.NoError(t, err)
		files = append(files, found...)
	}
	require.NotEmpty(t, files, "recorded histories in workflows/testdata")
	for _, file := range files {
		replayer, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
			Interceptors: []interceptor.WorkerInterceptor{ic},
		})
		require.NoError(t, err)
		workflows.Register(replayer)
		require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, file), file)
	}
	require.NoError(t, tp.ForceFlush(t.Context()))
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	assert.Empty(t, names, "spans emitted by replaying %d histories", len(files))
}
