// Package cli holds the starter's commands (contract R-81): demo, dev, run, status, result,
// cancel, batch, gc, deployment and version, their flags, usage texts, output and exit codes.
// Main dispatches a command line to them; command starter is a thin main over it.
package cli

import (
	"context"
	"fmt"
	"io"

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
  starter transcript [--json] [--full] [--session-root STORE] ID | --task N|--label L BATCH_ID
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
	"demo":       runDemo,
	"dev":        runDev,
	"run":        runRun,
	"status":     runStatus,
	"result":     runResult,
	"transcript": runTranscript,
	"cancel":     runCancel,
	"batch":      runBatch,
	"gc":         runGC,

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

// Main runs the starter command line args (without the program name) and returns the
// process exit code, once the starter's last spans are exported (flushTraces). The caller
// has already given app.MaybeRunChildRuntime its turn.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	code := dispatch(ctx, args, stdout, stderr)
	flushTraces(stderr)
	return code
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
