package main

import (
	"fmt"
	"io"

	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/worker/app"
)

// startWorker starts a worker inside the starter, as `starter dev` and `starter demo` run
// it. app's defaults make the starter's own executable the sdk child command (see
// app.MaybeRunChildRuntime, called first thing in main). The returned stop stops the worker
// and releases what it held.
func startWorker(c client.Client, opts app.Options) (stop func() error, err error) {
	if opts.Logger == nil {
		if opts.Logger, err = app.NewLogger("warn"); err != nil {
			return nil, fmt.Errorf("starter: %w", err)
		}
	}
	w, cleanup, err := app.New(c, opts)
	if err != nil {
		return nil, fmt.Errorf("starter: create worker: %w", err)
	}
	if err := w.Start(); err != nil {
		_ = cleanup()
		return nil, fmt.Errorf("starter: start worker on %s: %w", opts.TaskQueue, err)
	}
	return func() error {
		w.Stop()
		return cleanup()
	}, nil
}

// withMetrics serves the SDK metrics of clients dialed with copts on addr (--metrics-addr)
// and prints where; an empty addr serves nothing. The returned stop closes the export.
func withMetrics(addr string, copts *client.Options, stdout io.Writer) (stop func() error, err error) {
	if addr == "" {
		return func() error { return nil }, nil
	}
	m, err := app.ServeMetrics(addr, nil)
	if err != nil {
		return nil, fmt.Errorf("starter: %w", err)
	}
	copts.MetricsHandler = m.Handler()
	fmt.Fprintf(stdout, "Metrics          http://%s%s\n", m.Addr(), app.MetricsPath)
	return m.Close, nil
}
