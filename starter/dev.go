package main

import (
	"context"
	"fmt"
	"io"

	"github.com/subflow-dev/subflow/devserver"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// runDev serves an embedded Temporal server with its Web UI and, unless --no-worker, a
// worker, until interrupted (SPEC R-81).
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter dev", stderr)
	port := fs.Int("port", 7233, "frontend gRPC `PORT` (0 picks a free one)")
	uiPort := fs.Int("ui-port", 8233, "Web UI `PORT` (0 picks a free one)")
	db := fs.String("db", "", "SQLite `FILE` to persist the server in (default: in memory)")
	noWorker := fs.Bool("no-worker", false, "serve only the server and the UI")
	taskQueue := fs.String("task-queue", workflows.TaskQueue, "task `QUEUE` of the worker")
	metricsAddr := fs.String("metrics-addr", "", "serve the worker's Prometheus metrics on http://`ADDR`/metrics")
	slots := fs.Int("max-concurrent-activities", 0, "activity slots of the worker (default: the Temporal SDK's)")
	positional, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(positional) > 0 {
		fmt.Fprintf(stderr, "starter dev: unexpected argument %q\n", positional[0])
		return exitUsage
	}

	srv, err := devserver.Start(ctx, devserver.Options{Port: *port, UIPort: *uiPort, DBFile: *db})
	if err != nil {
		fmt.Fprintf(stderr, "starter dev: %v\n", err)
		return exitError
	}
	defer srv.Stop()
	fmt.Fprintf(stdout, "Temporal server  %s (namespace %s)\n", srv.FrontendAddr(), srv.Namespace())
	fmt.Fprintf(stdout, "Web UI           %s\n", srv.UIAddr())
	if *db != "" {
		fmt.Fprintf(stdout, "Database         %s\n", *db)
	}

	if !*noWorker {
		local, err := startLocalWorker(ctx, srv, srv.ClientOptions(), *metricsAddr, app.Options{TaskQueue: *taskQueue, MaxConcurrentActivities: *slots}, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "starter dev: %v\n", err)
			return exitError
		}
		defer func() {
			if err := local.stop(); err != nil {
				fmt.Fprintf(stderr, "starter dev: %v\n", err)
			}
		}()
		fmt.Fprintf(stdout, "Worker           task queue %s\n", *taskQueue)
	}
	fmt.Fprintf(stdout, "\nPoint clients and workers at it:\n  export TEMPORAL_ADDRESS=%s\n", srv.FrontendAddr())
	fmt.Fprintf(stdout, "  go run ./starter run --model-provider scripted --model script.json \"your task\"\n")
	fmt.Fprintln(stdout, "\nServing until interrupted (Ctrl-C).")
	<-ctx.Done()
	fmt.Fprintln(stdout, "Stopping.")
	return exitCompleted
}
