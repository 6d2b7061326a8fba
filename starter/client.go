package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"
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
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		addr := opts.HostPort
		if addr == "" {
			addr = client.DefaultHostPort
		}
		return nil, fmt.Errorf("starter: connect to Temporal at %s (set TEMPORAL_ADDRESS, or start one with `starter dev`): %w", addr, err)
	}
	return c, nil
}

// quietLogger logs warnings and errors to stderr.
func quietLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}
