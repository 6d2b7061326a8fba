package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/blob"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/inprocess"
	"github.com/subflow-dev/subflow/internal/admission"
	"github.com/subflow-dev/subflow/sdkproc"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// DefaultHeartbeatInterval is the heartbeat interval of Drive and RunSDKChild when
// Config.HeartbeatInterval is 0. It is also the largest interval New accepts: a cancel must
// reach a running child within one interval (contract R-72).
const DefaultHeartbeatInterval = time.Second

// Config configures the activities. Store, Models and Tools are required.
type Config struct {
	Store   session.Store
	Models  *model.Registry
	Tools   *tools.Registry
	Presets map[string]agent.Preset
	// SDK configures the sdk provider, registered under subagent.ProviderSDK whatever its
	// ProviderName says. An empty Command leaves the provider out: RunSDKChild then fails
	// without retries.
	SDK sdkproc.Config
	// HeartbeatInterval is how often Drive and RunSDKChild heartbeat their progress; 0 means
	// DefaultHeartbeatInterval, larger values are rejected.
	HeartbeatInterval time.Duration
	// Logger receives every activity's log lines; nil logs nothing.
	Logger *zap.Logger
	// SubagentProvider is the provider of the subagent tool's calls that name none (contract
	// R-9); "" means subagent.ProviderSpawn. Every in-process child gets the tool: its calls
	// start nested StartSubagent runs on the drive's task queue.
	SubagentProvider string
	// SubagentMaxDepth is the subagent tool's depth cap; the zero value is
	// subagent.DefaultMaxDepth. A numeric cap with a SubagentProvider lacking depthLimit is
	// rejected by New.
	SubagentMaxDepth subagent.MaxDepthSetting
	// ModelConcurrency limits the concurrent model requests per model provider across the
	// whole cluster (every worker passing the same limits): each request of an in-process
	// drive first acquires a permit from the provider's ModelAdmission workflow. Providers
	// not named are not limited.
	ModelConcurrency map[string]int
	// ModelRequestsPerMinute also caps the model requests per provider granted in any 60
	// seconds across the cluster (workflows.AdmissionInput.RequestsPerMinute), through the
	// same ModelAdmission workflow; a provider named here only is capped per minute alone.
	// It takes effect when the provider's limiter starts (it runs until continued as new
	// with the same input), so every worker should pass the same caps.
	ModelRequestsPerMinute map[string]int
	// AdmissionTaskQueue is the task queue of the ModelAdmission workflows; "" means the
	// drive's own task queue.
	AdmissionTaskQueue string
	// WorkspaceRoots are the directories the worker serves runs in, symlink-free; when set,
	// every run's cwd must resolve under one, checked when the run starts and by every tool
	// call (docs/deployment.md). Empty serves any cwd.
	WorkspaceRoots []string
	// HardLinkRoots are those of WorkspaceRoots whose hard links the operator trusts (worker
	// --workspace-root trust-hardlinks:DIR): elsewhere no child's file tools, in-process or
	// sdk, read a file with more than one hard link (tools.Env.HardLinkRoots).
	HardLinkRoots []string
	// Protected are state directories every child's file tools refuse whatever the cwd,
	// in-process and sdk alike (docs/sdk-children.md): the sdk runtime's session root, say.
	// The root of a file session store is added to them.
	Protected []string
	// Retention, when positive, is how long the retention cleanup keeps what closed runs
	// stored, instead of the namespace's retention (docs/durability.md); it should not exceed
	// the namespace's, past which Temporal forgets the runs anyway.
	Retention time.Duration
	// Digest is how much of a child's turn the digest and the heartbeats show
	// (docs/digest.md): "" is subagent.DigestFull; subagent.DigestNames leaves out tool
	// inputs, error texts and the answer; subagent.DigestOff builds none.
	Digest subagent.DigestLevel
}

// Activities holds the activity implementations. Register them with Register.
type Activities struct {
	store    session.Store
	blobs    *blob.Store // payloads and batch pages, in store
	host     *inprocess.Host
	sdk      *sdkproc.Provider // nil without an SDK command
	interval time.Duration
	log      *zap.Logger
	// nestedProvider and nestedMaxDepth configure the subagent tool (nested.go).
	nestedProvider string
	nestedMaxDepth subagent.MaxDepthSetting
	// signal delivers the sdk-published signal; tests replace it, since the test activity
	// environment has no client.
	signal func(ctx context.Context, workflowID string, pub workflows.Published) error
	// client returns the client nested runs start through; tests replace it, for the same
	// reason.
	client func(ctx context.Context) client.Client
	// admission admits the model requests of the drives and sdk children; nil without limits.
	admission *admission.Admitter
	// roots is Config.WorkspaceRoots.
	roots []string
	// retention is Config.Retention.
	retention time.Duration
	// digest is Config.Digest, parsed.
	digest subagent.DigestLevel
}

// New validates cfg and builds the in-process host and the sdk provider.
func New(cfg Config) (*Activities, error) {
	if cfg.Store == nil || cfg.Models == nil || cfg.Tools == nil {
		return nil, errors.New("activities: new: Store, Models and Tools are required")
	}
	interval := cfg.HeartbeatInterval
	switch {
	case interval == 0:
		interval = DefaultHeartbeatInterval
	case interval < 0 || interval > DefaultHeartbeatInterval:
		return nil, fmt.Errorf("activities: new: HeartbeatInterval %v must be positive and at most %v",
			interval, DefaultHeartbeatInterval)
	}
	digest, err := subagent.ParseDigestLevel(string(cfg.Digest))
	if err != nil {
		return nil, fmt.Errorf("activities: new: %w", err)
	}
	nestedProvider := cfg.SubagentProvider
	if nestedProvider == "" {
		nestedProvider = subagent.ProviderSpawn
	}
	if err := checkSubagentTool(nestedProvider, cfg.SubagentMaxDepth); err != nil {
		return nil, fmt.Errorf("activities: new: %w", err)
	}
	admitter, err := admission.New(cfg.ModelConcurrency, cfg.ModelRequestsPerMinute, cfg.AdmissionTaskQueue)
	if err != nil {
		return nil, fmt.Errorf("activities: new: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	models := cfg.Models
	if admitter != nil {
		models = admitter.Models(models)
	}
	protected := append([]string(nil), cfg.Protected...)
	if r, ok := cfg.Store.(interface{ Root() string }); ok {
		protected = append(protected, r.Root()) // payloads and batch pages live there too
	}
	host, err := inprocess.NewHost(inprocess.Options{
		Store: cfg.Store, Models: models, Tools: cfg.Tools, Presets: cfg.Presets, Logger: log,
		Protected: protected, Roots: cfg.WorkspaceRoots, HardLinkRoots: cfg.HardLinkRoots,
	})
	if err != nil {
		return nil, fmt.Errorf("activities: new: %w", err)
	}
	a := &Activities{
		store: cfg.Store, host: host, interval: interval, log: log, signal: signalWorkflow,
		nestedProvider: nestedProvider, nestedMaxDepth: cfg.SubagentMaxDepth,
		client:    func(ctx context.Context) client.Client { return activity.GetClient(ctx) },
		admission: admitter,
		roots:     cfg.WorkspaceRoots,
		retention: cfg.Retention,
		digest:    digest,
	}
	a.blobs = blob.New(cfg.Store, func(ctx context.Context, name string) error { return a.own(ctx, name) })
	if cfg.SDK.Command != "" {
		sdkCfg := cfg.SDK
		sdkCfg.ProviderName = subagent.ProviderSDK
		sdkCfg.Protected = append(sdkCfg.Protected, protected...)
		sdkCfg.Roots, sdkCfg.HardLinkRoots = cfg.WorkspaceRoots, cfg.HardLinkRoots
		if a.sdk, err = sdkproc.New(sdkCfg, sdkproc.Options{Logger: log}); err != nil {
			return nil, fmt.Errorf("activities: new: sdk provider: %w", err)
		}
	}
	return a, nil
}

// TypeAdmissionIDTaken is the error type of a model request whose provider's limiter id is
// held by a workflow that is not a limiter (admission.TypeIDTaken).
const TypeAdmissionIDTaken = admission.TypeIDTaken

// ErrAdmissionIDTaken is wrapped by the error of a model request whose provider's limiter id
// is held by a running workflow of another type (admission.ErrIDTaken).
var ErrAdmissionIDTaken = admission.ErrIDTaken

// ReleasePermits gives back the idle model-admission permits this worker holds for reuse.
// Call it once the worker stopped (no drive runs any more), before the process exits.
func (a *Activities) ReleasePermits() {
	if a.admission != nil {
		a.admission.ReleasePermits()
	}
}

// Register registers every activity of a under its name in package workflows.
func Register(r worker.ActivityRegistry, a *Activities) {
	for name, fn := range map[string]any{
		workflows.ActivityCreateRootSession: a.CreateRootSession,
		workflows.ActivityPublish:           a.Publish,
		workflows.ActivityDrive:             a.Drive,
		workflows.ActivityReadResult:        a.ReadResult,
		workflows.ActivityRunSDKChild:       a.RunSDKChild,
		workflows.ActivityRecordNested:      a.RecordNested,
		workflows.ActivityReadPayload:       a.ReadPayload,
		workflows.ActivityStorePayload:      a.StorePayload,
		workflows.ActivityReadTranscript:    a.ReadTranscript,
		workflows.ActivityCleanupCutoff:     a.CleanupCutoff,
		workflows.ActivityCleanupPage:       a.CleanupPage,
		// The Batch workflow's.
		workflows.ActivitySaveBatchPage:     a.SaveBatchPage,
		workflows.ActivityLoadBatchPage:     a.LoadBatchPage,
		workflows.ActivityRemoveBatchPages:  a.RemoveBatchPages,
		workflows.ActivityAwaitChild:        a.AwaitChild,
		workflows.ActivityRetainTaskParents: a.RetainTaskParents,
		// The long-lived workflows'.
		workflows.ActivityCheckTargetBuild: a.CheckTargetBuild,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}
