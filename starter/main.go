// Command starter starts and inspects subflow delegations (contract R-81):
//
//	starter demo [--exit]                 embedded Temporal + Web UI + worker, and a showcase
//	starter demo --connect                the showcase on the cluster of the client environment
//	starter dev [--port N] [--ui-port N]  embedded Temporal + Web UI + worker, until interrupted
//	starter run [flags] TASK              start one delegation and wait for its result
//	starter status ID                     phase, child id, progress and partial output of a run
//	starter status --tree ID [--json]     the run's delegation tree
//	starter result ID [--json]            wait for a run's result
//	starter cancel ID                     cancel (abort) a run
//	starter batch FILE.jsonl              run one delegation per line, with live progress
//	starter batch status|results|… ID     follow, read or steer a running batch
//	starter gc [--dry-run] [--older-than D] remove what runs Temporal no longer keeps stored
//	starter deployment describe|set-current|ramp|wait-drained …  roll a new worker build out
//	starter version                       module version, build id and VCS revision
//
// run, status, result and cancel connect with the standard Temporal client environment
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, temporal.toml profiles). run and result exit with
// the run's stop reason: 0 completed, 3 aborted, 4 max-tokens, 5 refusal, 1 error; 2 means
// bad usage or a request rejected before publication (the message is printed to stderr).
//
// When its first argument is "child-runtime" the starter is the SDK child runtime, so its
// own executable serves as the default child command of sdk runs.
//
// The commands live in package starter/internal/cli; this is its thin main.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/subflow-dev/subflow/starter/internal/cli"
	"github.com/subflow-dev/subflow/worker/app"
)

func main() {
	app.MaybeRunChildRuntime()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
