package childruntime

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"

	"github.com/subflow-dev/subflow/internal/telemetry"
	"github.com/subflow-dev/subflow/subagent"
)

// Main runs the child runtime on the process's stdio, so that any binary can offer it as a
// subcommand (contract R-83): app.MaybeRunChildRuntime, its only caller, passes the arguments
// after the `child-runtime` subcommand.
// The flags are --config FILE (presets, see Options.ConfigPath), --session-root DIR
// (Options.SessionRoot) and --subagent-max-depth (Options.SubagentMaxDepth). It returns 0 after
// `shutdown`, stdin EOF or SIGTERM, ExitInterrupted after SIGINT, ExitUsage for bad arguments.
func Main(args []string) int {
	fs := flag.NewFlagSet("child-runtime", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	config := fs.String("config", "", "JSON presets file adding to the built-in presets")
	sessionRoot := fs.String("session-root", "", "directory of the runtime's own sessions (default $XDG_STATE_HOME/subflow/sdk-sessions, else ~/.local/state/subflow/sdk-sessions)")
	var maxDepth subagent.MaxDepthSetting
	fs.Var(&maxDepth, "subagent-max-depth", "depth cap of the sessions' subagent tool: a number or provider-managed (default 3)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: <worker or starter binary> child-runtime [--config FILE] [--session-root DIR] [--subagent-max-depth N]\n\nServes the child runtime's JSON-RPC protocol on stdin/stdout.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "child-runtime: unexpected arguments: %q\n", fs.Args())
		return ExitUsage
	}

	// Without a SIGPIPE handler, a write to a closed stdout would kill the process; with it the
	// write fails with EPIPE and the runtime still disposes its agents.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var interrupted atomic.Bool
	go func() {
		select {
		case sig := <-sigs:
			interrupted.Store(sig == syscall.SIGINT)
			cancel()
		case <-ctx.Done():
		}
	}()

	// The runtime's spans go where the worker's do: the worker hands its children the OTLP
	// environment (telemetry.ChildEnv). Tracing is never a reason not to serve.
	tracing, err := telemetry.Setup(ctx, telemetry.ServiceAgent)
	if err != nil {
		fmt.Fprintf(os.Stderr, "child-runtime: tracing off: %v\n", err)
		tracing = &telemetry.Tracing{}
	}
	code := Run(ctx, Options{
		In:          os.Stdin,
		Out:         os.Stdout,
		Err:         os.Stderr,
		ConfigPath:  *config,
		SessionRoot: *sessionRoot,
		Version:     buildVersion(),

		SubagentMaxDepth: maxDepth,
	})
	if err := tracing.Shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "child-runtime: %v\n", err)
	}
	if code == 0 && interrupted.Load() {
		return ExitInterrupted
	}
	return code
}

// buildVersion is the main module's version when the binary was built from a tagged module,
// else DefaultVersion.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return DefaultVersion
}
