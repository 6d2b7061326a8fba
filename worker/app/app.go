// Package app builds the subflow worker: the session store, model and tool registries,
// presets and sdk child command from Options (flags and environment), the activities, and a
// Temporal worker with every workflow and activity registered. The worker program is a thin
// main over it; `starter dev`, `starter demo` and the end-to-end tests run the same worker
// in-process through New.
//
// Every binary that may serve as the sdk child command calls MaybeRunChildRuntime first in
// main (or TestMain): the default child command is the running executable with the
// ChildRuntimeArg subcommand (SPEC R-83).
package app

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/sdkproc"
	"github.com/subflow-dev/subflow/sdkproc/server"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// ChildRuntimeArg is the subcommand that turns a subflow binary into the sdk child runtime.
const ChildRuntimeArg = "child-runtime"

// MaybeRunChildRuntime runs the child runtime and exits when os.Args[1] is ChildRuntimeArg,
// passing it the arguments after the subcommand; otherwise it returns at once.
func MaybeRunChildRuntime() {
	if len(os.Args) > 1 && os.Args[1] == ChildRuntimeArg {
		os.Exit(server.MainArgs(os.Args[2:]))
	}
}

// DefaultStopTimeout is Options.StopTimeout when 0: long enough for running drives to
// suspend and for sdk children to go through the whole dispose ladder (SPEC R-55).
const DefaultStopTimeout = 20 * time.Second

// Options configure New. The zero value serves task queue "subflow" with sessions under
// DefaultSessionRoot and the running executable as the sdk child command.
type Options struct {
	// TaskQueue defaults to workflows.TaskQueue.
	TaskQueue string
	// SessionRoot is the directory of the file session store.
	SessionRoot string
	// SessionStore names the session store as storeopen.Open reads it: a directory (file
	// store) or a postgres:// URL (the Postgres store, shared by workers on several hosts).
	// When empty: SessionRoot, else $SUBFLOW_SESSION_STORE, else DefaultSessionRoot.
	SessionStore string
	// PresetsFile is a JSON presets file (agent.LoadPresets), also handed to the default sdk
	// child runtime as --config; "" means the built-in presets.
	PresetsFile string
	// SDKCommand and SDKArgs are the sdk child command; an empty SDKCommand means this
	// executable with ChildRuntimeArg (and --config PresetsFile), see DefaultSDKCommand.
	SDKCommand string
	SDKArgs    []string
	// ChildEnv names worker environment variables sdk children get besides the built-in
	// allowlist (sdkproc.Config.ChildEnv, docs/sdk-children.md).
	ChildEnv []string
	// HeartbeatInterval is how often a running drive heartbeats to the Temporal server, each
	// time one RecordActivityTaskHeartbeat call (billed as an action on Temporal Cloud). A
	// cancel reaches a drive within one interval. 0 means $SUBFLOW_HEARTBEAT_INTERVAL, else
	// activities.DefaultHeartbeatInterval (1 s), which is also the largest allowed. A dead
	// worker's drive is retried elsewhere after workflows.HeartbeatTimeout whatever the
	// interval.
	HeartbeatInterval time.Duration
	// StopTimeout is how long Stop lets running activities wind down (worker.Options
	// WorkerStopTimeout); 0 means DefaultStopTimeout.
	StopTimeout time.Duration
	// Logger receives the worker's logs; nil logs nothing.
	Logger *zap.Logger
	// MaxConcurrentActivities caps the activities the worker runs at once (its activity
	// slots); 0 means the Temporal SDK default. Nested runs hold no slot while they wait for
	// their children, so a small cap slows a deep fan-out but does not starve it.
	MaxConcurrentActivities int
	// SubagentProvider is the provider of subagent tool calls that name none; "" means
	// spawn (activities.Config.SubagentProvider).
	SubagentProvider string
	// SubagentMaxDepth is the subagent tool's depth cap; the zero value is
	// subagent.DefaultMaxDepth.
	SubagentMaxDepth subagent.MaxDepthSetting
	// ModelConcurrency caps concurrent model requests per model provider across the cluster
	// (activities.Config.ModelConcurrency); every worker should pass the same caps.
	ModelConcurrency map[string]int
}

// New builds the worker for c with every workflow and activity registered, not yet started.
// The caller runs it (Run, or Start and Stop) and then calls cleanup, which closes the
// session store.
func New(c client.Client, opts Options) (w worker.Worker, cleanup func() error, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	store, closeStore, err := openStore(opts)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, closeStore())
		}
	}()
	reg := &tools.Registry{}
	if err := tools.RegisterBuiltins(reg); err != nil {
		return nil, nil, fmt.Errorf("app: register tools: %w", err)
	}
	var presets map[string]agent.Preset
	if opts.PresetsFile != "" {
		if presets, err = agent.LoadPresets(opts.PresetsFile); err != nil {
			return nil, nil, fmt.Errorf("app: %w", err)
		}
	}
	acts, err := activities.New(activities.Config{
		Store:   store,
		Models:  model.NewDefaultRegistry(),
		Tools:   reg,
		Presets: presets,
		SDK:     sdkConfig(opts),
		Logger:  opts.Logger,

		SubagentProvider: opts.SubagentProvider,
		SubagentMaxDepth: opts.SubagentMaxDepth,

		HeartbeatInterval: opts.HeartbeatInterval,
		// The limiters run on the common queue, whatever queue a drive runs on.
		ModelConcurrency:   opts.ModelConcurrency,
		AdmissionTaskQueue: opts.TaskQueue,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("app: %w", err)
	}
	// The SDK batches heartbeats for up to its throttle interval before sending one; capped at
	// the interval, every heartbeat is sent, so a cancel (which comes back with a heartbeat
	// response) reaches the drive within one interval (SPEC R-72).
	w = worker.New(c, opts.TaskQueue, worker.Options{
		WorkerStopTimeout:                  opts.StopTimeout,
		MaxHeartbeatThrottleInterval:       opts.HeartbeatInterval,
		DefaultHeartbeatThrottleInterval:   opts.HeartbeatInterval,
		MaxConcurrentActivityExecutionSize: opts.MaxConcurrentActivities,
	})
	workflows.Register(w)
	activities.Register(w, acts)
	opts.Logger.Info("worker ready", zap.String("taskQueue", opts.TaskQueue),
		zap.String("sessionStore", describeStore(opts.SessionStore)), zap.String("sdkCommand", opts.SDKCommand),
		zap.Strings("sdkArgs", opts.SDKArgs))
	return w, closeStore, nil
}

// modelEnv are the model adapters' variables. The sdk child's environment is an allowlist
// that drops every *KEY* variable (SPEC R-53), so the worker hands these over explicitly.
var modelEnv = []string{"DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"}

// sdkConfig is the sdk provider's configuration.
func sdkConfig(opts Options) sdkproc.Config {
	cfg := sdkproc.Config{Command: opts.SDKCommand, Args: opts.SDKArgs, ChildEnv: opts.ChildEnv}
	for _, name := range modelEnv {
		if v, ok := os.LookupEnv(name); ok {
			if cfg.Env == nil {
				cfg.Env = map[string]string{}
			}
			cfg.Env[name] = v
		}
	}
	return cfg
}
