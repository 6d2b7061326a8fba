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
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/subflow-dev/subflow/worker/app"
)

// Exit codes of run and result (contract R-81).
const (
	exitCompleted = 0
	exitError     = 1
	exitUsage     = 2
	exitAborted   = 3
	exitMaxTokens = 4
	exitRefusal   = 5
)

const usage = `usage:
  starter demo [--exit] [--port N] [--ui-port N] [--metrics-addr ADDR] | starter demo --connect
  starter dev [--port N] [--ui-port N] [--db FILE] [--no-worker] [--task-queue Q] [--metrics-addr ADDR]
              [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE] | --tls-dev DIR]
  starter run [flags] TASK        (starter run -h lists the flags)
  starter status [--tree] ID [--json]
  starter result ID [--json]
  starter cancel ID
  starter batch [--concurrency N] [--out RESULTS.jsonl] [--detach] FILE.jsonl
  starter batch status|results|pause|resume|cancel|retry ID, starter batch resize ID --concurrency N
  starter gc [--dry-run] [--older-than DURATION] [--task-queue Q]
  starter deployment describe NAME | set-current NAME BUILD_ID | ramp NAME BUILD_ID PERCENT | wait-drained NAME BUILD_ID
  starter version
`

// command is one subcommand: it parses args and returns the process exit code.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) int

var commands = map[string]command{
	"demo":   runDemo,
	"dev":    runDev,
	"run":    runRun,
	"status": runStatus,
	"result": runResult,
	"cancel": runCancel,
	"batch":  runBatch,
	"gc":     runGC,

	"deployment": runDeployment,
	"version":    runVersion,
}

// runVersion prints the binary's module version, the build id of its in-process worker and
// its VCS revision.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "starter version: unexpected argument %q\n", args[0])
		return exitUsage
	}
	info := app.ReadBuildInfo()
	info.Print(stdout, "starter", app.DefaultBuildID(""))
	return exitCompleted
}

func main() {
	app.MaybeRunChildRuntime()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	flushTraces(os.Stderr)
	os.Exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, ok := commands[args[0]]
	if !ok {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(stdout, usage)
			return exitCompleted
		}
		fmt.Fprintf(stderr, "starter: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
	return cmd(ctx, args[1:], stdout, stderr)
}
