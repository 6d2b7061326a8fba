package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/internal/childruntime"
	"github.com/subflow-dev/subflow/internal/telemetry"
	"github.com/subflow-dev/subflow/internal/telemetry/temporalotel"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// Main is the whole worker command: args is os.Args (the program name first). It runs the
// subcommand args[1] names — version, replay (the replay gate) or ChildRuntimeArg — or else
// serves: it parses the flags, connects to Temporal from the standard client environment,
// sets up tracing and metrics, and serves until SIGINT or SIGTERM. Every flag and subcommand
// is declared here, and `-h` prints the usage generated from them. It returns the process exit
// code: 0 after a clean stop or -h, 2 for bad usage, 1 for any other failure.
func Main(args []string, stdout, stderr io.Writer) int {
	name := "worker"
	if len(args) > 0 {
		name, args = filepath.Base(args[0]), args[1:]
	}
	if len(args) > 0 {
		switch args[0] {
		case "version":
			ReadBuildInfo().Print(stdout, name, DefaultBuildID(""))
			return 0
		case "replay":
			return replayMain(name+" replay", args[1:], stdout, stderr)
		case ChildRuntimeArg:
			return childruntime.Main(args[1:])
		}
	}
	return serve(name, args, stderr)
}

// serve is the worker's serve mode: the worker command without a subcommand.
func serve(name string, args []string, stderr io.Writer) int {
	var opts Options
	var sdkArgs, childEnv StringList
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage:
  %[1]s [flags]                  serve StartSubagent, the batch and their activities until SIGINT or SIGTERM
  %[1]s replay [flags]           the replay gate: replay histories against this build (-h for its flags)
  %[1]s version                  print the build
  %[1]s %[2]s [flags]    serve the sdk child runtime on stdio (-h for its flags)

The Temporal connection comes from the standard client environment (TEMPORAL_ADDRESS,
TEMPORAL_NAMESPACE, temporal.toml profiles).

Flags:
`, name, ChildRuntimeArg)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.TaskQueue, "task-queue", workflows.TaskQueue, "Temporal task queue to serve")
	fs.StringVar(&opts.SessionRoot, "session-root", "",
		"session store: a directory or a postgres:// URL (default $"+EnvSessionStore+", else $"+EnvSessionRoot+
			", else $XDG_DATA_HOME/subflow/sessions or ~/.local/share/subflow/sessions)")
	fs.StringVar(&opts.PresetsFile, "presets", "", "JSON presets file")
	fs.StringVar(&opts.SDKCommand, "sdk-command", "", "sdk child command (default: this executable "+ChildRuntimeArg+")")
	fs.Var(&sdkArgs, "sdk-arg", "argument of the sdk child command (repeatable)")
	fs.Var(&childEnv, "child-env", "pass the environment variable `NAME` to sdk children besides the built-in allowlist (repeatable)")
	fs.DurationVar(&opts.HeartbeatInterval, "heartbeat-interval", 0,
		"how often a running drive heartbeats, at most 1s; each heartbeat is one Temporal call (default $"+EnvHeartbeatInterval+", else 1s)")
	limits := providerLimits{}
	fs.Var(limits, "model-concurrency", "`PROVIDER=N`: at most N concurrent requests to the model provider across the cluster (repeatable; give every worker the same)")
	rpm := providerLimits{}
	fs.Var(rpm, "model-rpm", "`PROVIDER=N`: at most N requests to the model provider per minute across the cluster (repeatable; give every worker the same)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on http://`ADDR`/metrics (default: off)")
	pprofAddr := fs.String("pprof-addr", "", "serve the Go runtime's profiles (heap, goroutine, CPU) on http://`ADDR`/debug/pprof/, for go tool pprof; keep ADDR loopback or operator-only (default: off)")
	fs.IntVar(&opts.MaxConcurrentActivities, "max-concurrent-activities", 0,
		"activity slots of the worker (default: the Temporal SDK's, 1000)")
	fs.IntVar(&opts.Pollers, "pollers", 0,
		"requests for workflow tasks, and as many for activity tasks, kept open on each task queue served and on its interactive lane (default: the Temporal SDK's, 2; 8 takes tasks on a queue batches keep busy sooner, at the cost of more tasks lost for a timeout to a frozen worker)")
	fs.IntVar(&opts.InteractiveActivities, "interactive-activities", 0,
		"activity slots of each queue's interactive lane, where interactive runs (starter run, subflow.Start) run and batches never do (default: --max-concurrent-activities)")
	fs.Var(YieldFlag(&opts.YieldActivities), "yield-activities",
		"while an interactive run has a task in hand on this worker (and for 2s after), once the host's CPU is seen busy (more than half in use over a second), start a batch's drive only while fewer than `N` run on its queue, to leave the interactive run the CPU; auto: as many as the worker may use CPUs (GOMAXPROCS); 0 never yields (default 0)")
	fs.StringVar(&opts.SubagentProvider, "subagent-provider", "",
		"provider of subagent tool calls that name none (default spawn)")
	fs.Var(&opts.SubagentMaxDepth, "subagent-max-depth",
		"depth cap of the subagent tool: a number or provider-managed (default 3)")
	fs.DurationVar(&opts.CleanupEvery, "gc-every", time.Hour,
		"run the retention cleanup of the session store every `DURATION` on each queue served, as a Temporal Schedule (0: leave the schedule as it is)")
	fs.DurationVar(&opts.Retention, "retention", 0,
		"keep what closed runs stored for `DURATION` instead of the namespace's retention (default: the namespace's)")
	fs.Func("digest", "how much of a child's turn its run's digest and heartbeats show, `LEVEL` full, names (tool names; no inputs, errors or answer) or off (default full)",
		func(v string) error {
			level, err := subagent.ParseDigestLevel(v)
			opts.Digest = level
			return err
		})
	fs.StringVar(&opts.DeploymentName, "deployment-name", "",
		"join the Worker Deployment `NAME` (default $"+EnvDeploymentName+"; empty: unversioned)")
	fs.StringVar(&opts.BuildID, "build-id", "",
		"build id of this worker in its deployment (default $"+EnvBuildID+", else the binary's module version or VCS revision)")
	fs.BoolVar(&opts.MakeCurrent, "make-current", false,
		"make this build the deployment's current version once it polls, for a deployment of one build at a time (default $"+EnvMakeCurrent+" = true)")
	fs.Func("workspace-root", "serve runs whose cwd lies under `DIR`: local:DIR for a directory on this host only (its runs come to this worker), DIR or shared:DIR for one mounted on every worker; trust-hardlinks:DIR (or local,trust-hardlinks:DIR) lets the file tools read files with several hard links there (repeatable)",
		func(v string) error {
			root, err := subflow.ParseWorkspaceRoot(v)
			opts.WorkspaceRoots = append(opts.WorkspaceRoots, root)
			return err
		})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		// A mistyped subcommand would otherwise start a worker that serves the default queue.
		fmt.Fprintf(stderr, "worker: unexpected argument %q (subcommands: version, replay, %s)\n", fs.Arg(0), ChildRuntimeArg)
		return 2
	}
	if err := opts.CheckCounts(); err != nil {
		// Before the connection: a bad count should not wait on an unreachable server.
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	opts.SDKArgs = sdkArgs
	opts.ChildEnv = childEnv
	opts.ModelConcurrency = limits
	opts.ModelRequestsPerMinute = rpm

	logger, err := NewLogger(*level)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	defer func() { _ = logger.Sync() }()
	opts.Logger = logger

	copts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		logger.Error("load Temporal client options", zap.Error(err))
		return 1
	}
	copts.Logger = TemporalLogger(logger)
	tracing, err := temporalotel.Setup(context.Background(), telemetry.ServiceWorker, &copts)
	if err != nil {
		logger.Error("set up tracing", zap.Error(err))
		return 1
	}
	defer func() {
		if err := tracing.Shutdown(); err != nil {
			logger.Error("stop tracing", zap.Error(err))
		}
	}()
	if tracing.On() {
		logger.Info("exporting traces over OTLP")
	}
	if *metricsAddr != "" {
		metrics, err := ServeMetrics(*metricsAddr, logger)
		if err != nil {
			logger.Error("serve metrics", zap.Error(err))
			return 1
		}
		defer func() {
			if err := metrics.Close(); err != nil {
				logger.Error("stop metrics", zap.Error(err))
			}
		}()
		copts.MetricsHandler = metrics.Handler()
		logger.Info("serving metrics", zap.String("url", "http://"+metrics.Addr()+MetricsPath))
	}
	if *pprofAddr != "" {
		profiles, err := ServeProfiles(*pprofAddr)
		if err != nil {
			logger.Error("serve profiles", zap.Error(err))
			return 1
		}
		defer func() {
			if err := profiles.Close(); err != nil {
				logger.Error("stop profiles", zap.Error(err))
			}
		}()
		logger.Info("serving profiles", zap.String("url", "http://"+profiles.Addr()+ProfilesPath))
	}
	c, err := subflow.Dial(context.Background(), copts)
	if err != nil {
		logger.Error("connect to Temporal", zap.Error(err))
		return 1
	}
	defer c.Close()

	w, cleanup, err := New(c, opts)
	if err != nil {
		logger.Error("build worker", zap.Error(err))
		return 1
	}
	defer func() {
		if err := cleanup(); err != nil {
			logger.Error("close session store", zap.Error(err))
		}
	}()
	// Run stops the worker on SIGINT/SIGTERM and waits up to the stop timeout for running
	// activities, which see the worker stop channel.
	if err := w.Run(worker.InterruptCh()); err != nil {
		logger.Error("worker", zap.Error(err))
		return 1
	}
	return 0
}
