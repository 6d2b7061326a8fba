package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// replayMain is `worker replay`, the replay gate (docs/deployment.md): exit 0 when every
// history replays on this binary's workflows, 1 naming every one that does not (or when the
// histories cannot be read), 2 on bad usage.
func replayMain(name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dirs StringList
	fs.Var(&dirs, "dir", "replay the recorded histories in `DIR` (*.json, */*.json) instead of the namespace's runs (repeatable)")
	var queues StringList
	fs.Var(&queues, "task-queue", "only the runs of task queue `Q` and of its interactive lane (repeatable; default: every queue of the namespace)")
	closed := fs.Int("closed", DefaultReplayClosed, "also replay the latest `N` closed runs (0: none)")
	deployment := fs.String("deployment-name", "", "the Worker Deployment the build will serve (default $"+EnvDeploymentName+")")
	buildID := fs.String("build-id", "", "the build id it will serve as (default $"+EnvBuildID+", else the binary's own)")
	verbose := fs.Bool("v", false, "name every history replayed and skipped")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	opts := ReplayOptions{Dirs: dirs, TaskQueues: queues, DeploymentName: *deployment, BuildID: DefaultBuildID(*buildID)}
	if opts.DeploymentName == "" {
		opts.DeploymentName = os.Getenv(EnvDeploymentName)
	}
	opts.Closed = *closed
	if *closed == 0 {
		opts.Closed = -1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(dirs) == 0 {
		copts, err := envconfig.LoadDefaultClientOptions()
		if err != nil {
			fmt.Fprintf(stderr, "%s: load Temporal client options: %v\n", name, err)
			return 1
		}
		c, err := client.DialContext(ctx, copts)
		if err != nil {
			fmt.Fprintf(stderr, "%s: connect to Temporal: %v\n", name, err)
			return 1
		}
		defer c.Close()
		opts.Client, opts.Namespace = c, copts.Namespace
		if opts.Namespace == "" {
			opts.Namespace = client.DefaultNamespace
		}
	}
	rep, err := Replay(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return printReplay(rep, *verbose, stdout, stderr)
}

// printReplay prints the report and returns the exit code.
func printReplay(rep ReplayReport, verbose bool, stdout, stderr io.Writer) int {
	if verbose {
		for _, r := range rep.Replayed {
			fmt.Fprintf(stdout, "ok    %s\n", r)
		}
		for _, r := range rep.Skipped {
			fmt.Fprintf(stdout, "skip  %s\n", r)
		}
	}
	for _, f := range rep.Failed {
		fmt.Fprintf(stderr, "FAIL  %s\n", f.Error())
	}
	fmt.Fprintf(stdout, "%d replayed, %d skipped (pinned to another version), %d failed\n",
		len(rep.Replayed), len(rep.Skipped), len(rep.Failed))
	if len(rep.Failed) > 0 {
		return 1
	}
	return 0
}
