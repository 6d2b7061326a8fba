package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"

	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/devserver"
	"github.com/subflow-dev/subflow/worker/app"
)

// localWorker is the set-up `starter dev` and `starter demo` share on an embedded server: the
// metrics export (when asked for), a client of the server and a worker on it.
type localWorker struct {
	c       client.Client
	buildID string
	stop    func() error
}

// DevDeploymentName is the Worker Deployment of the worker `starter dev` and `starter demo`
// run in-process; its build id is the binary's own, else DevBuildID.
const DevDeploymentName = "subflow-dev"

// DevBuildID is the in-process worker's build id when the binary records none (go run).
const DevBuildID = "dev"

// startLocalWorker dials srv with copts (its ClientOptions, possibly adjusted), serving the
// SDK metrics on metricsAddr when set and tracing when the environment asks for it, and
// starts a worker with opts. The worker joins DevDeploymentName, as a deployed worker would
// (docs/deployment.md), and its version is made current once it polls, so runs start on it.
// Stop stops the worker,
// closes the client and the metrics export, in that order. Errors name what failed.
func startLocalWorker(ctx context.Context, srv *devserver.Server, copts client.Options, metricsAddr string,
	opts app.Options, stdout io.Writer) (*localWorker, error) {
	if err := traceClient(ctx, &copts); err != nil {
		return nil, err
	}
	stopMetrics, err := withMetrics(metricsAddr, &copts, stdout)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, copts)
	if err != nil {
		_ = stopMetrics()
		return nil, fmt.Errorf("connect to %s: %w", srv.FrontendAddr(), err)
	}
	if opts.DeploymentName == "" {
		opts.DeploymentName = DevDeploymentName
		opts.BuildID = cmp.Or(app.DefaultBuildID(opts.BuildID), DevBuildID)
	}
	// Made current below, before any run starts.
	opts.MakeCurrent = true
	stopWorker, err := startWorker(c, opts)
	if err == nil {
		if err = subflow.SetCurrentWhenPolled(ctx, c, opts.DeploymentName, opts.BuildID); err != nil {
			err = errors.Join(err, stopWorker())
		}
	}
	if err != nil {
		c.Close()
		_ = stopMetrics()
		return nil, err
	}
	return &localWorker{c: c, buildID: opts.BuildID, stop: func() error {
		err := stopWorker()
		c.Close()
		if merr := stopMetrics(); merr != nil {
			err = errors.Join(err, merr)
		}
		if err != nil {
			return fmt.Errorf("stop worker: %w", err)
		}
		return nil
	}}, nil
}

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
