package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/devserver"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

// runDev serves an embedded Temporal server with its Web UI and, unless --no-worker, a
// worker, until interrupted (contract R-81).
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("starter dev", stderr)
	port := fs.Int("port", 7233, "frontend gRPC `PORT` (0 picks a free one)")
	uiPort := fs.Int("ui-port", 8233, "Web UI `PORT` (0 picks a free one)")
	db := fs.String("db", "", "SQLite `FILE` to persist the server in (default: in memory)")
	noWorker := fs.Bool("no-worker", false, "serve only the server and the UI")
	taskQueue := fs.String("task-queue", workflows.TaskQueue, "task `QUEUE` of the worker")
	metricsAddr := fs.String("metrics-addr", "", "serve the worker's Prometheus metrics on http://`ADDR`/metrics")
	slots := fs.Int("max-concurrent-activities", 0, "activity slots of the worker (default: the Temporal SDK's)")
	yield := 0
	fs.Var(app.YieldFlag(&yield), "yield-activities", "while an interactive run has a task in hand on the worker (and for 2s after), once the host's CPU is seen busy (more than half in use over a second), start a batch's drive only while fewer than `N` run, to leave the interactive run the CPU; auto: as many as the worker may use CPUs (GOMAXPROCS); 0 never yields (default 0)")
	tlsCert := fs.String("tls-cert", "", "serve the frontend over TLS with the certificate `FILE` (PEM; needs --tls-key)")
	tlsKey := fs.String("tls-key", "", "private key `FILE` of --tls-cert")
	tlsClientCA := fs.String("tls-client-ca", "", "require client certificates signed by a CA of `FILE` (mutual TLS)")
	tlsDev := fs.String("tls-dev", "", "serve mutual TLS with a throwaway CA and certificates written to `DIR` (made if absent, reused if there)")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	workerOpts := app.Options{TaskQueue: *taskQueue, MaxConcurrentActivities: *slots, YieldActivities: yield}
	if !*noWorker {
		// Checked before the server starts, so that a bad count costs nothing.
		if err := workerOpts.CheckCounts(); err != nil {
			fmt.Fprintf(stderr, "starter dev: %v\n", err)
			return exitUsage
		}
	}

	serverTLS, devCerts, err := devTLS(*tlsCert, *tlsKey, *tlsClientCA, *tlsDev)
	if err != nil {
		fmt.Fprintf(stderr, "starter dev: %v\n", err)
		return exitUsage
	}
	srv, err := devserver.Start(ctx, devserver.Options{Port: *port, UIPort: *uiPort, DBFile: *db, TLS: serverTLS})
	if err != nil {
		fmt.Fprintf(stderr, "starter dev: %v\n", err)
		return exitError
	}
	defer srv.Stop()
	fmt.Fprintf(stdout, "Temporal server  %s (namespace %s)\n", srv.FrontendAddr(), srv.Namespace())
	fmt.Fprintf(stdout, "Web UI           %s\n", srv.UIAddr())
	if *db != "" {
		fmt.Fprintf(stdout, "Database         %s\n", *db)
	} else {
		// The store in memory grows with every run it keeps, faster than on a file: a batch
		// of tens of thousands of tasks exhausts it (docs/batches.md).
		fmt.Fprintln(stdout, "Database         in memory (--db FILE for batches of more than 10,000 tasks)")
	}

	if !*noWorker {
		copts := srv.ClientOptions()
		copts.Logger = activities.QuietCancellations(copts.Logger)
		local, err := startLocalWorker(ctx, srv, copts, *metricsAddr, workerOpts, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "starter dev: %v\n", err)
			return exitError
		}
		defer func() {
			if err := local.stop(); err != nil {
				fmt.Fprintf(stderr, "starter dev: %v\n", err)
			}
		}()
		fmt.Fprintf(stdout, "Worker           task queue %s, Worker Deployment %s build %s (current)\n",
			*taskQueue, DevDeploymentName, local.buildID)
	}
	fmt.Fprintf(stdout, "\nPoint clients and workers at it:\n  export TEMPORAL_ADDRESS=%s\n", srv.FrontendAddr())
	switch {
	case devCerts != nil:
		fmt.Fprintf(stdout, "  export TEMPORAL_TLS_SERVER_CA_CERT_PATH=%s\n  export TEMPORAL_TLS_CLIENT_CERT_PATH=%s\n  export TEMPORAL_TLS_CLIENT_KEY_PATH=%s\n",
			devCerts.CA, devCerts.ClientCert, devCerts.ClientKey)
	case serverTLS != nil:
		fmt.Fprintln(stdout, "  export TEMPORAL_TLS=true   (and TEMPORAL_TLS_* for your CA and client certificate, docs/auth.md)")
	}
	fmt.Fprintf(stdout, "  go run ./starter run --model-provider scripted --model script.json \"your task\"\n")
	fmt.Fprintln(stdout, "\nServing until interrupted (Ctrl-C).")
	<-ctx.Done()
	fmt.Fprintln(stdout, "Stopping.")
	return exitCompleted
}

// devTLS is the TLS of `starter dev` from its flags: none, the given files, or (--tls-dev)
// generated dev certificates, whose paths it also returns.
func devTLS(cert, key, clientCA, devDir string) (*devserver.TLS, *devserver.DevCerts, error) {
	if devDir != "" {
		if cert != "" || key != "" || clientCA != "" {
			return nil, nil, errors.New("--tls-dev makes its own certificates: drop --tls-cert, --tls-key and --tls-client-ca")
		}
		if err := os.MkdirAll(devDir, 0o700); err != nil {
			return nil, nil, err
		}
		certs, err := devserver.GenerateDevCerts(devDir)
		if err != nil {
			return nil, nil, err
		}
		return certs.TLS(), &certs, nil
	}
	if cert == "" && key == "" && clientCA == "" {
		return nil, nil, nil
	}
	if cert == "" || key == "" {
		return nil, nil, errors.New("--tls-cert and --tls-key go together")
	}
	return &devserver.TLS{CertFile: cert, KeyFile: key, ClientCAFile: clientCA}, nil, nil
}
