package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/internal/telemetry"
	"github.com/subflow-dev/subflow/internal/telemetry/temporalotel"
)

// dial connects to the Temporal server named by the standard client environment
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, temporal.toml profiles), as the worker and the
// temporal CLI do. The SDK's own logs are limited to warnings, on stderr.
func dial(ctx context.Context) (client.Client, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, fmt.Errorf("starter: load Temporal client config: %w", err)
	}
	opts.Logger = quietLogger()
	if err := traceClient(ctx, &opts); err != nil {
		return nil, err
	}
	c, err := subflow.Dial(ctx, opts)
	if err != nil {
		addr := opts.HostPort
		if addr == "" {
			addr = client.DefaultHostPort
		}
		return nil, fmt.Errorf("starter: connect to Temporal at %s (set TEMPORAL_ADDRESS, or start one with `starter dev`): %w", addr, err)
	}
	return c, nil
}

// namespace is the namespace dial connects to: the environment's, "" for the default.
func namespace() string {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return ""
	}
	return opts.Namespace
}

// starterTracing is the tracing of the starter's process, set up on the first traceClient.
var starterTracing struct {
	once         sync.Once
	t            *telemetry.Tracing
	interceptors []interceptor.ClientInterceptor
	err          error
}

// traceClient adds the tracing interceptor to opts when the environment asks for traces
// (docs/tracing.md); main flushes the spans before the process exits (flushTraces).
func traceClient(ctx context.Context, opts *client.Options) error {
	st := &starterTracing
	st.once.Do(func() {
		var copts client.Options
		if st.t, st.err = temporalotel.Setup(ctx, telemetry.ServiceStarter, &copts); st.err != nil {
			st.err = fmt.Errorf("starter: %w", st.err)
		}
		st.interceptors = copts.Interceptors
	})
	opts.Interceptors = append(opts.Interceptors, st.interceptors...)
	return st.err
}

// flushTraces exports the starter's last spans.
func flushTraces(stderr io.Writer) {
	if err := starterTracing.t.Shutdown(); err != nil {
		fmt.Fprintf(stderr, "starter: %v\n", err)
	}
}

// quietLogger logs warnings and errors to stderr; an activity's cancellation, at info, is
// not one of them (activities.QuietCancellations).
func quietLogger() log.Logger {
	return activities.QuietCancellations(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
}
