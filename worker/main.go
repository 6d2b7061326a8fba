// Command worker is the subflow Temporal worker (contract R-80): it serves StartSubagent and its
// activities on a task queue until SIGINT or SIGTERM, then drains — running drives are
// suspended, unfinished, for another worker to resume; sdk children are disposed.
//
//	worker [--task-queue subflow] [--session-root DIR] [--presets FILE]
//	       [--sdk-command CMD [--sdk-arg ARG]...] [--child-env NAME]... [--log-level info]
//	       [--metrics-addr 127.0.0.1:9090] [--max-concurrent-activities N]
//	       [--subagent-provider spawn] [--subagent-max-depth 3] [--heartbeat-interval 1s]
//	       [--gc-every 1h] [--retention DURATION]
//	       [--deployment-name NAME [--build-id ID]]
//	worker replay [--dir DIR]... [--closed N] [--deployment-name NAME] [--build-id ID]
//	worker version
//	worker child-runtime [--config FILE]
//
// With --deployment-name (or $SUBFLOW_DEPLOYMENT_NAME) the worker joins that Worker
// Deployment as version --build-id (or $SUBFLOW_BUILD_ID, else the binary's module version
// or VCS revision): see docs/deployment.md for the rollout. `worker replay` is the replay
// gate: it replays the histories of the namespace's open runs and latest closed runs (or
// recorded ones from --dir) against this binary's workflows, and exits 1 naming every run
// that does not replay.
//
// The Temporal connection comes from the standard client environment (TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, temporal.toml profiles); the DeepSeek key from DEEPSEEK_API_KEY;
// SUBFLOW_SESSION_ROOT and SUBFLOW_SESSION_STORE choose the session store;
// SUBFLOW_HEARTBEAT_INTERVAL is the default of --heartbeat-interval. Logs are JSON lines
// on stderr; with --metrics-addr the Temporal SDK's metrics are served for Prometheus on
// http://ADDR/metrics; with OTEL_EXPORTER_OTLP_ENDPOINT set, traces are exported over OTLP
// (docs/tracing.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/internal/telemetry"
	"github.com/subflow-dev/subflow/internal/telemetry/temporalotel"
	"github.com/subflow-dev/subflow/worker/app"
	"github.com/subflow-dev/subflow/workflows"
)

func main() {
	app.MaybeRunChildRuntime()
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "version":
			info := app.ReadBuildInfo()
			info.Print(os.Stdout, "worker", app.DefaultBuildID(""))
			return
		case "replay":
			os.Exit(runReplay(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	os.Exit(run())
}

func run() int {
	var opts app.Options
	var sdkArgs, childEnv app.StringList
	flag.StringVar(&opts.TaskQueue, "task-queue", workflows.TaskQueue, "Temporal task queue to serve")
	flag.StringVar(&opts.SessionRoot, "session-root", "",
		"session directory (default $"+app.EnvSessionRoot+", else ~/.local/share/subflow/sessions)")
	flag.StringVar(&opts.PresetsFile, "presets", "", "JSON presets file")
	flag.StringVar(&opts.SDKCommand, "sdk-command", "", "sdk child command (default: this executable "+app.ChildRuntimeArg+")")
	flag.Var(&sdkArgs, "sdk-arg", "argument of the sdk child command (repeatable)")
	flag.Var(&childEnv, "child-env", "pass the environment variable `NAME` to sdk children besides the built-in allowlist (repeatable)")
	flag.DurationVar(&opts.HeartbeatInterval, "heartbeat-interval", 0,
		"how often a running drive heartbeats, at most 1s; each heartbeat is one Temporal call (default $"+app.EnvHeartbeatInterval+", else 1s)")
	limits := providerLimits{}
	flag.Var(limits, "model-concurrency", "`PROVIDER=N`: at most N concurrent requests to the model provider across the cluster (repeatable; give every worker the same)")
	rpm := providerLimits{}
	flag.Var(rpm, "model-rpm", "`PROVIDER=N`: at most N requests to the model provider per minute across the cluster (repeatable; give every worker the same)")
	level := flag.String("log-level", "info", "log level: debug, info, warn or error")
	metricsAddr := flag.String("metrics-addr", "", "serve Prometheus metrics on http://`ADDR`/metrics (default: off)")
	flag.IntVar(&opts.MaxConcurrentActivities, "max-concurrent-activities", 0,
		"activity slots of the worker (default: the Temporal SDK's, 1000)")
	flag.StringVar(&opts.SubagentProvider, "subagent-provider", "",
		"provider of subagent tool calls that name none (default spawn)")
	flag.Var(&opts.SubagentMaxDepth, "subagent-max-depth",
		"depth cap of the subagent tool: a number or provider-managed (default 3)")
	flag.DurationVar(&opts.CleanupEvery, "gc-every", time.Hour,
		"run the retention cleanup of the session store every `DURATION` on each queue served, as a Temporal Schedule (0: leave the schedule as it is)")
	flag.DurationVar(&opts.Retention, "retention", 0,
		"keep what closed runs stored for `DURATION` instead of the namespace's retention (default: the namespace's)")
	flag.StringVar(&opts.DeploymentName, "deployment-name", "",
		"join the Worker Deployment `NAME` (default $"+app.EnvDeploymentName+"; empty: unversioned)")
	flag.StringVar(&opts.BuildID, "build-id", "",
		"build id of this worker in its deployment (default $"+app.EnvBuildID+", else the binary's module version or VCS revision)")
	flag.Func("workspace-root", "serve runs whose cwd lies under `DIR`: local:DIR for a directory on this host only (its runs come to this worker), DIR or shared:DIR for one mounted on every worker (repeatable)",
		func(v string) error {
			root, err := subflow.ParseWorkspaceRoot(v)
			opts.WorkspaceRoots = append(opts.WorkspaceRoots, root)
			return err
		})
	flag.Parse()
	opts.SDKArgs = sdkArgs
	opts.ChildEnv = childEnv
	opts.ModelConcurrency = limits
	opts.ModelRequestsPerMinute = rpm

	logger, err := app.NewLogger(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer func() { _ = logger.Sync() }()
	opts.Logger = logger

	copts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		logger.Error("load Temporal client options", zap.Error(err))
		return 1
	}
	copts.Logger = app.TemporalLogger(logger)
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
		metrics, err := app.ServeMetrics(*metricsAddr, logger)
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
		logger.Info("serving metrics", zap.String("url", "http://"+metrics.Addr()+app.MetricsPath))
	}
	c, err := subflow.Dial(context.Background(), copts)
	if err != nil {
		logger.Error("connect to Temporal", zap.Error(err))
		return 1
	}
	defer c.Close()

	w, cleanup, err := app.New(c, opts)
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

// providerLimits is the repeatable PROVIDER=N flag --model-concurrency.
type providerLimits map[string]int

func (l providerLimits) String() string { return fmt.Sprint(map[string]int(l)) }

func (l providerLimits) Set(v string) error {
	provider, n, ok := strings.Cut(v, "=")
	limit, err := strconv.Atoi(n)
	if !ok || provider == "" || err != nil || limit < 1 {
		return fmt.Errorf("want PROVIDER=N with N at least 1: %q", v)
	}
	l[provider] = limit
	return nil
}
