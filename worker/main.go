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
//	worker replay [--dir DIR]... [--task-queue Q]... [--closed N] [--deployment-name NAME]
//	       [--build-id ID] [-v]
//	worker version
//	worker child-runtime [--config FILE] [--session-root DIR] [--subagent-max-depth N]
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
// --session-root, else SUBFLOW_SESSION_STORE, else SUBFLOW_SESSION_ROOT chooses the session
// store (a directory or a postgres:// URL);
// SUBFLOW_HEARTBEAT_INTERVAL is the default of --heartbeat-interval. Logs are JSON lines
// on stderr; with --metrics-addr the Temporal SDK's metrics are served for Prometheus on
// http://ADDR/metrics; with OTEL_EXPORTER_OTLP_ENDPOINT set, traces are exported over OTLP
// (docs/tracing.md).
package main

import (
	"os"

	"github.com/subflow-dev/subflow/worker/app"
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
	os.Exit(app.Main(os.Args[0], os.Args[1:], os.Stderr))
}
