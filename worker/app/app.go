// Package app builds the subflow worker: the session store, model and tool registries,
// presets and sdk child command from Options (flags and environment), the activities, and a
// Temporal worker with every workflow and activity registered. The worker program is a thin
// main over it; `starter dev`, `starter demo` and the end-to-end tests run the same worker
// in-process through New.
//
// Every binary that may serve as the sdk child command calls MaybeRunChildRuntime first in
// main (or TestMain): the default child command is the running executable with the
// ChildRuntimeArg subcommand (contract R-83).
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session/storeopen"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/internal/childruntime"
	"github.com/subflow-dev/subflow/internal/hostcpu"
	"github.com/subflow-dev/subflow/internal/telemetry"
	"github.com/subflow-dev/subflow/sdkproc"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// ChildRuntimeArg is the subcommand that turns a subflow binary into the sdk child runtime.
const ChildRuntimeArg = "child-runtime"

// MaybeRunChildRuntime runs the child runtime and exits when os.Args[1] is ChildRuntimeArg,
// passing it the arguments after the subcommand; otherwise it returns at once.
func MaybeRunChildRuntime() {
	if len(os.Args) > 1 && os.Args[1] == ChildRuntimeArg {
		os.Exit(childruntime.Main(os.Args[2:]))
	}
}

// DefaultStopTimeout is Options.StopTimeout when 0: long enough for running drives to
// suspend and for sdk children to go through the whole dispose ladder (contract R-55).
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
	// ModelRequestsPerMinute caps the model requests per provider granted in any minute across
	// the cluster (activities.Config.ModelRequestsPerMinute); every worker should pass the same.
	ModelRequestsPerMinute map[string]int
	// CleanupEvery, when positive, makes New create (or update) the Schedule that runs the
	// retention cleanup every CleanupEvery on each queue the worker polls
	// (subflow.EnsureCleanupSchedule, docs/durability.md); 0 leaves the schedules as they are.
	CleanupEvery time.Duration
	// Retention, when positive, is what the cleanup keeps of closed runs instead of the
	// namespace's retention (activities.Config.Retention and the schedule's cleanups).
	Retention time.Duration
	// Digest is how much of a child's turn the runs' digests and heartbeats show
	// (activities.Config.Digest): "" or full, names, off.
	Digest subagent.DigestLevel
	// WorkspaceRoots are the directories this worker serves runs in (worker --workspace-root).
	// They are stated in the worker's Temporal identity, where starters read them
	// (subflow.RouteWorkspace); for each host-local root the worker also polls the root's own
	// queue (subflow.WorkspaceQueue), where every run whose cwd lies under the root executes.
	WorkspaceRoots []subflow.WorkspaceRoot
	// DeploymentName, when set (or $SUBFLOW_DEPLOYMENT_NAME), makes the worker join that
	// Worker Deployment as version BuildID (docs/deployment.md, "Rolling out a new build"):
	// every run stays on the build that started it (Pinned); the long-lived workflows move to
	// the deployment's current version at continue-as-new (workflows.Register).
	// Empty: the worker is unversioned.
	DeploymentName string
	// BuildID identifies this build within the deployment; "" means $SUBFLOW_BUILD_ID, else
	// the binary's own (BuildInfo.BuildID). Only read with a DeploymentName.
	BuildID string
	// Models are the model adapters of the in-process drives, by provider name; nil means
	// model.NewDefaultRegistry() (deepseek-official, openai-compatible, scripted). sdk children
	// have their own, in their process.
	Models *model.Registry
	// MakeCurrent makes the worker's version the deployment's current one once it polls
	// (after Start), for a deployment that runs one build at a time (docker-compose.yml):
	// each build takes over as it starts. A rolling upgrade leaves it off and makes a build
	// current with `starter deployment set-current` (docs/deployment.md).
	MakeCurrent bool
	// Pollers is how many requests for workflow tasks, and as many for activity tasks, the
	// worker keeps open on each queue it serves; 0 leaves the Temporal SDK's default (2), and
	// 1 is refused (the SDK alternates a worker's workflow-task pollers between its sticky
	// queue and the common one). More pollers trade one failure for another
	// (docs/benchmarks.md, "Interactive latency under batches"): with 8, a run started while
	// batches kept the worker busy took 0.97–1.2 × its idle time on the embedded server
	// instead of 1.8–3.3 ×, but a worker frozen with its polls open (a stopped process, a
	// partition) is handed up to that many tasks per queue, each lost until its timeout, and
	// the run of TestWorkerFrozenPastHeartbeatTimeout took 78 s instead of 13 s.
	Pollers int
	// InteractiveActivities is the activity slots of each queue's interactive lane
	// (workflows.InteractiveQueue), which the worker polls beside the queue: only the tasks
	// of interactive runs (workflows.Interactive: `starter run`, subflow.Start) take them, so
	// such a run never waits for a slot a batch's drive holds. 0 means
	// MaxConcurrentActivities.
	InteractiveActivities int
	// YieldActivities, when positive, makes the worker yield its CPU to interactive runs
	// when its host's CPU is busy: while any of its interactive lanes has a task in hand, or
	// had one less than 2 s ago, each queue starts a new activity (a batch's drive) only
	// while fewer than YieldActivities run, from the moment more than half of the host's CPU
	// time was in use over a second meanwhile. A drive already running finishes. Priority
	// and the lanes keep an interactive run's tasks from queueing behind a batch's; on a
	// host the batches keep busy, its tasks still wait for the CPU, which this frees
	// (docs/benchmarks.md, "Interactive latency under batches"). The cost is the batches'
	// rate while interactive runs are in hand, and only where the CPU was busy: drives that
	// wait on a model's API leave it idle. The host's CPU is read from Linux's /proc/stat;
	// elsewhere the worker never yields. YieldAuto keeps as many as the worker may use CPUs; 0
	// never yields. It must be fewer than MaxConcurrentActivities (the SDK's 1000 when that
	// is 0).
	YieldActivities int
	// Workflows registers the workflows on each queue's worker; nil means
	// workflows.RegisterWithOptions with the interactive lane on. Tests register another
	// build's workflows under the same names with it.
	Workflows func(worker.WorkflowRegistry)
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
	roots, err := resolveRoots(opts.WorkspaceRoots)
	if err != nil {
		return nil, nil, err
	}
	if opts.Models == nil {
		opts.Models = model.NewDefaultRegistry()
	}
	var linkRoots []string // the resolved roots whose hard links the operator trusts
	for i, r := range opts.WorkspaceRoots {
		if r.TrustHardLinks {
			linkRoots = append(linkRoots, roots[i])
		}
	}
	acts, err := activities.New(activities.Config{
		Store:   store,
		Models:  opts.Models,
		Tools:   reg,
		Presets: presets,
		SDK:     sdkConfig(opts),
		Logger:  opts.Logger,

		SubagentProvider: opts.SubagentProvider,
		SubagentMaxDepth: opts.SubagentMaxDepth,

		HeartbeatInterval: opts.HeartbeatInterval,
		// The limiters run on the common queue, whatever queue a drive runs on.
		ModelConcurrency:       opts.ModelConcurrency,
		ModelRequestsPerMinute: opts.ModelRequestsPerMinute,
		AdmissionTaskQueue:     opts.TaskQueue,

		WorkspaceRoots: roots,
		HardLinkRoots:  linkRoots,
		Protected:      sdkSessionRoots(opts),
		Retention:      opts.Retention,
		Digest:         opts.Digest,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("app: %w", err)
	}
	// The SDK batches heartbeats for up to its throttle interval before sending one; capped at
	// the interval, every heartbeat is sent, so a cancel (which comes back with a heartbeat
	// response) reaches the drive within one interval (contract R-72).
	wopts := worker.Options{
		WorkerStopTimeout:                  opts.StopTimeout,
		MaxHeartbeatThrottleInterval:       opts.HeartbeatInterval,
		DefaultHeartbeatThrottleInterval:   opts.HeartbeatInterval,
		MaxConcurrentActivityExecutionSize: opts.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskPollers:   opts.Pollers,
		MaxConcurrentActivityTaskPollers:   opts.Pollers,
		Identity:                           workerIdentity(opts.WorkspaceRoots),
		DeploymentOptions:                  deploymentOptions(opts),
	}
	queues := []string{opts.TaskQueue}
	for _, r := range opts.WorkspaceRoots {
		if r.Local {
			queues = append(queues, subflow.WorkspaceQueue(opts.TaskQueue, r.Dir))
		}
	}
	// Each queue's interactive lane, with pollers and activity slots of its own: the
	// interactive runs subflow.Start starts there, and the drives of those started on the
	// queue, never wait for a poll or a slot a batch's task holds. Its workflow worker has
	// its own sticky queue too, so no workflow task of such a run queues behind a batch's.
	lane := wopts
	lane.MaxConcurrentActivityExecutionSize = cmp.Or(opts.InteractiveActivities, opts.MaxConcurrentActivities)
	var load *interactiveLoad
	watching, stopWatching := context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			stopWatching()
		}
	}()
	if opts.YieldActivities > 0 {
		host, err := watchHostCPU(watching, hostcpu.Path, hostSampleEvery)
		if err != nil {
			opts.Logger.Info("the worker never yields to interactive runs: it cannot tell whether its host's CPU is busy",
				zap.Int("yieldActivities", opts.YieldActivities), zap.Error(err))
		}
		load = newInteractiveLoad(yieldHold, host.Busy)
		wopts.MaxConcurrentActivityExecutionSize, lane.MaxConcurrentActivityExecutionSize = 0, 0 // the tuners' (the SDK refuses both)
	}
	ws := &multiWorker{stopped: make(chan struct{})}
	var polled []string
	for _, q := range queues {
		qopts, lopts := wopts, lane
		if load != nil {
			qopts.Tuner, lopts.Tuner = yieldTuners(load, cmp.Or(opts.MaxConcurrentActivities, sdkDefaultSlots), opts.YieldActivities,
				cmp.Or(opts.InteractiveActivities, opts.MaxConcurrentActivities, sdkDefaultSlots))
		}
		qw := worker.New(c, q, ws.stopOnFatal(qopts, q))
		lw := worker.New(c, workflows.InteractiveQueue(q), ws.stopOnFatal(lopts, workflows.InteractiveQueue(q)))
		for _, w := range []worker.Worker{qw, lw} {
			opts.Workflows(w)
			w.RegisterDynamicWorkflow(unknownWorkflow(cmp.Or(opts.BuildID, "unversioned")), workflow.DynamicRegisterOptions{})
			activities.Register(w, acts)
		}
		ws.ws = append(ws.ws, qw, lw)
		ws.lanes = append(ws.lanes, lw)
		polled = append(polled, q, workflows.InteractiveQueue(q))
	}
	if err := checkQueueNames(context.Background(), c, polled); err != nil {
		return nil, nil, err
	}
	if opts.CleanupEvery > 0 {
		for _, q := range queues {
			err := subflow.EnsureCleanupSchedule(context.Background(), c, subflow.CleanupScheduleOptions{
				TaskQueue: q, Every: opts.CleanupEvery, Retention: opts.Retention,
			})
			if err != nil {
				return nil, nil, fmt.Errorf("app: %w", err)
			}
		}
	}
	served := make([]string, len(opts.WorkspaceRoots))
	for i, r := range opts.WorkspaceRoots {
		served[i] = r.String()
	}
	opts.Logger.Info("worker ready", zap.String("taskQueue", opts.TaskQueue), zap.Strings("taskQueues", polled),
		zap.Strings("workspaceRoots", served),
		zap.String("sessionStore", storeopen.Describe(opts.SessionStore)), zap.String("sdkCommand", opts.SDKCommand),
		zap.Strings("sdkArgs", opts.SDKArgs), zap.String("deploymentName", opts.DeploymentName),
		zap.String("buildId", opts.BuildID), zap.Int("yieldActivities", opts.YieldActivities))
	publishing, stopPublishing := context.WithCancel(context.Background())
	if opts.DeploymentName != "" {
		go publishWorkflows(publishing, c, opts, registeredNames(opts.Workflows))
	}
	if opts.MakeCurrent && opts.DeploymentName != "" {
		go makeCurrent(publishing, c, opts)
	} else {
		warnIfIdle(context.Background(), c, opts)
	}
	cleanup = func() error {
		stopPublishing()
		stopWatching()
		acts.ReleasePermits()
		return closeStore()
	}
	return ws, cleanup, nil
}

// deploymentOptions joins the worker to its Worker Deployment, when it names one. Workflows
// registered without a versioning behavior are Pinned: a run finishes on the build that
// started it.
func deploymentOptions(opts Options) worker.DeploymentOptions {
	if opts.DeploymentName == "" {
		return worker.DeploymentOptions{}
	}
	return worker.DeploymentOptions{
		UseVersioning:             true,
		Version:                   worker.WorkerDeploymentVersion{DeploymentName: opts.DeploymentName, BuildID: opts.BuildID},
		DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
	}
}

// workerIdentity is the Temporal identity of the worker: the SDK's default form, followed by
// the workspace roots it serves.
func workerIdentity(roots []subflow.WorkspaceRoot) string {
	host, _ := os.Hostname()
	return subflow.WorkerIdentity(fmt.Sprintf("%d@%s@", os.Getpid(), host), roots)
}

// multiWorker runs the Temporal workers of a worker/app worker as one worker.Worker: one
// per task queue it serves, and one per queue's interactive lane. Workflow and activity
// registrations go to every worker, Nexus registrations to every queue's worker; Start, Run
// and Stop cover all.
type multiWorker struct {
	ws []worker.Worker
	// lanes are the workers of ws that poll an interactive lane, where no Nexus endpoint
	// points.
	lanes   []worker.Worker
	stopped chan struct{}
	once    sync.Once

	mu    sync.Mutex
	fatal error // the first queue worker's fatal error (stopOnFatal)
}

// stopOnFatal returns o for the worker of queue, set to stop every worker of m when that one
// meets a fatal error. The SDK stops a worker whose polls the server keeps refusing (a task
// queue name or an identity over the server's limit.maxIDLength, a namespace deleted) after
// two minutes of retries; the other queues' workers would poll on, and a worker that serves
// part of its queues looks up while the runs on the rest wait. Run returns the error.
func (m *multiWorker) stopOnFatal(o worker.Options, queue string) worker.Options {
	identity := o.Identity
	o.OnFatalError = func(err error) {
		// Only an invalid argument can be a name over the limit; a deleted namespace or an
		// unsupported client is told as it is.
		var hint string
		var bad *serviceerror.InvalidArgument
		if errors.As(err, &bad) {
			hint = fmt.Sprintf(" (its identity is %d bytes, with the workspace roots it serves; a server refuses an identity or a task queue name longer than its limit.maxIDLength)", len(identity))
		}
		m.mu.Lock()
		if m.fatal == nil {
			m.fatal = fmt.Errorf("app: the worker of task queue %s stopped: the server refused it: %w%s", subagent.Head(queue, 80), err, hint)
		}
		m.mu.Unlock()
		go m.Stop()
	}
	return o
}

// fatalErr is the first fatal error of m's workers, nil when none met one.
func (m *multiWorker) fatalErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fatal
}

// each calls register on every worker, lanes included.
func (m *multiWorker) each(register func(worker.Worker)) {
	for _, x := range m.ws {
		register(x)
	}
}

// eachQueue calls register on every queue's worker, the lanes left out.
func (m *multiWorker) eachQueue(register func(worker.Worker)) {
	for _, x := range m.ws {
		if !slices.Contains(m.lanes, x) {
			register(x)
		}
	}
}

func (m *multiWorker) RegisterWorkflow(w any) {
	m.each(func(x worker.Worker) { x.RegisterWorkflow(w) })
}

func (m *multiWorker) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	m.each(func(x worker.Worker) { x.RegisterWorkflowWithOptions(w, o) })
}

func (m *multiWorker) RegisterDynamicWorkflow(w any, o workflow.DynamicRegisterOptions) {
	m.each(func(x worker.Worker) { x.RegisterDynamicWorkflow(w, o) })
}

func (m *multiWorker) RegisterActivity(a any) {
	m.each(func(x worker.Worker) { x.RegisterActivity(a) })
}

func (m *multiWorker) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	m.each(func(x worker.Worker) { x.RegisterActivityWithOptions(a, o) })
}

func (m *multiWorker) RegisterDynamicActivity(a any, o activity.DynamicRegisterOptions) {
	m.each(func(x worker.Worker) { x.RegisterDynamicActivity(a, o) })
}

func (m *multiWorker) RegisterNexusService(s *nexus.Service) {
	m.eachQueue(func(x worker.Worker) { x.RegisterNexusService(s) })
}

// Start starts every queue's worker; when one fails, those already started are stopped.
func (m *multiWorker) Start() error {
	for i, x := range m.ws {
		if err := x.Start(); err != nil {
			for _, started := range m.ws[:i] {
				started.Stop()
			}
			return err
		}
	}
	return nil
}

// Run starts every queue's worker and stops them all when interruptCh receives (nil: never)
// or when one of them meets a fatal error, which it returns.
func (m *multiWorker) Run(interruptCh <-chan any) error {
	if err := m.Start(); err != nil {
		return err
	}
	select {
	case <-interruptCh:
		m.Stop()
	case <-m.stopped:
	}
	return m.fatalErr()
}

// Stop stops every queue's worker, letting running activities wind down.
func (m *multiWorker) Stop() {
	var wg sync.WaitGroup
	for _, x := range m.ws {
		wg.Add(1)
		go func() { defer wg.Done(); x.Stop() }()
	}
	wg.Wait()
	m.once.Do(func() { close(m.stopped) })
}

// modelEnv are the model adapters' variables. The sdk child's environment is an allowlist
// that drops every *KEY* variable (contract R-53), so the worker hands these over explicitly.
var modelEnv = []string{"DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"}

// sdkConfig is the sdk provider's configuration. When the environment asks for traces, the
// children get its OTLP variables too (telemetry.ChildEnv), to export their own spans.
func sdkConfig(opts Options) sdkproc.Config {
	cfg := sdkproc.Config{Command: opts.SDKCommand, Args: opts.SDKArgs, ChildEnv: opts.ChildEnv}
	if telemetry.Enabled() {
		cfg.ChildEnv = append(slices.Clip(cfg.ChildEnv), telemetry.ChildEnv...)
	}
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

// resolveRoots returns the directories of the served roots with their symlinks resolved:
// the form the activities and the tools compare a resolved cwd with. A root that does not
// exist here is an error: the worker could serve nothing under it.
func resolveRoots(roots []subflow.WorkspaceRoot) ([]string, error) {
	var dirs []string
	for _, r := range roots {
		real, err := filepath.EvalSymlinks(r.Dir)
		if err != nil {
			return nil, fmt.Errorf("app: workspace root %s: %w", r, err)
		}
		dirs = append(dirs, real)
	}
	return dirs, nil
}

// sdkSessionRoots are the directories the sdk child runtime may keep its sessions in, for
// every child's file tools to refuse (docs/sdk-children.md): a --session-root among the sdk
// args, else the runtime's default as the child computes it (its environment has HOME but
// not XDG_STATE_HOME unless passed), and as this process would.
func sdkSessionRoots(opts Options) []string {
	var roots []string
	for i, a := range opts.SDKArgs {
		if v, ok := strings.CutPrefix(a, "--session-root="); ok {
			roots = append(roots, v)
		} else if (a == "--session-root" || a == "-session-root") && i+1 < len(opts.SDKArgs) {
			roots = append(roots, opts.SDKArgs[i+1])
		}
	}
	if r, err := childruntime.DefaultSessionRoot(); err == nil {
		roots = append(roots, r)
	}
	if home, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(home, ".local", "state", "subflow", "sdk-sessions"))
	}
	for i, r := range roots {
		if abs, err := filepath.Abs(r); err == nil {
			roots[i] = abs
		}
	}
	return roots
}
