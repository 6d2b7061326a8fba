package main

import (
	"go.temporal.io/sdk/client"

	"fmt"

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
