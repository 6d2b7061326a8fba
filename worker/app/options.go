package app

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/session/storeopen"
	"github.com/subflow-dev/subflow/workflows"
)

// Environment variables read for Options defaults (contract R-80).
const (
	// EnvSessionRoot is the default file store directory.
	EnvSessionRoot = "SUBFLOW_SESSION_ROOT"
	// EnvSessionStore is the default session store spec (storeopen.Open): a directory or a
	// postgres:// URL. It wins over EnvSessionRoot.
	EnvSessionStore = storeopen.EnvVar
	// EnvHeartbeatInterval is the default Options.HeartbeatInterval, a Go duration ("500ms").
	EnvHeartbeatInterval = "SUBFLOW_HEARTBEAT_INTERVAL"
	// EnvDeploymentName is the default Options.DeploymentName (worker --deployment-name).
	EnvDeploymentName = "SUBFLOW_DEPLOYMENT_NAME"
	// EnvBuildID is the default Options.BuildID (worker --build-id).
	EnvBuildID = "SUBFLOW_BUILD_ID"
	// EnvMakeCurrent, "true", is the default of Options.MakeCurrent (worker --make-current).
	EnvMakeCurrent = "SUBFLOW_MAKE_CURRENT"
)

// DefaultSessionRoot returns $SUBFLOW_SESSION_ROOT when set, else the per-user data
// directory: $XDG_DATA_HOME/subflow/sessions, or ~/.local/share/subflow/sessions.
func DefaultSessionRoot() (string, error) {
	if root := os.Getenv(EnvSessionRoot); root != "" {
		return root, nil
	}
	if data := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(data) {
		return filepath.Join(data, "subflow", "sessions"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("app: default session root: set %s: %w", EnvSessionRoot, err)
	}
	return filepath.Join(home, ".local", "share", "subflow", "sessions"), nil
}

// DefaultSDKCommand returns the default sdk child command (contract R-83): the running
// executable with ChildRuntimeArg, and --config presetsFile when one is given.
func DefaultSDKCommand(presetsFile string) (command string, args []string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("app: default sdk command: %w", err)
	}
	args = []string{ChildRuntimeArg}
	if presetsFile != "" {
		abs, err := filepath.Abs(presetsFile)
		if err != nil {
			return "", nil, fmt.Errorf("app: default sdk command: %w", err)
		}
		args = append(args, "--config", abs)
	}
	return exe, args, nil
}

// DefaultBuildID returns id when set, else $SUBFLOW_BUILD_ID, else the binary's own build id
// (BuildInfo.BuildID), which may be "".
func DefaultBuildID(id string) string {
	if id != "" {
		return id
	}
	if env := os.Getenv(EnvBuildID); env != "" {
		return env
	}
	return ReadBuildInfo().BuildID()
}

// YieldAuto is the Options.YieldActivities of a worker that keeps as many activities running
// as it has CPUs while it yields to interactive runs (fewer when it has fewer slots):
// `worker --yield-activities auto`.
const YieldAuto = -1

// autoYield is YieldAuto's count for a worker of slots activity slots (0: the SDK's): the
// CPUs the worker may use (GOMAXPROCS, which follows a container's CPU limit), at most one
// fewer than the slots; 0, never yield, with one slot.
func autoYield(slots int) int {
	return min(runtime.GOMAXPROCS(0), cmp.Or(slots, sdkDefaultSlots)-1)
}

// CheckCounts reports the first of o's slot and poller counts that New refuses, naming it
// and its value. It reads nothing else, so that a command can check its flags before it
// starts anything.
func (o Options) CheckCounts() error {
	if o.MaxConcurrentActivities < 0 {
		return fmt.Errorf("app: max concurrent activities %d must not be negative", o.MaxConcurrentActivities)
	}
	if o.InteractiveActivities < 0 {
		return fmt.Errorf("app: interactive activities %d must not be negative", o.InteractiveActivities)
	}
	if o.YieldActivities < 0 && o.YieldActivities != YieldAuto {
		return fmt.Errorf("app: yield activities %d must not be negative", o.YieldActivities)
	}
	if slots := cmp.Or(o.MaxConcurrentActivities, sdkDefaultSlots); o.YieldActivities >= slots {
		return fmt.Errorf("app: yield activities %d must be fewer than the worker's %d activity slots: it is what each queue keeps of them while interactive runs are in hand", o.YieldActivities, slots)
	}
	if o.Pollers < 0 || o.Pollers == 1 {
		return fmt.Errorf("app: pollers %d: want 2 or more, or 0 for the SDK's default (a worker's workflow-task pollers alternate between two queues)", o.Pollers)
	}
	return nil
}

// withDefaults fills the zero fields of o.
func (o Options) withDefaults() (Options, error) {
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.TaskQueue
	}
	if err := o.CheckCounts(); err != nil {
		return o, err
	}
	if o.YieldActivities == YieldAuto {
		o.YieldActivities = autoYield(o.MaxConcurrentActivities)
	}
	if o.SessionStore == "" {
		// Explicit options first, then the environment, then the per-user directory.
		switch {
		case o.SessionRoot != "":
			o.SessionStore = o.SessionRoot
		case os.Getenv(EnvSessionStore) != "":
			o.SessionStore = os.Getenv(EnvSessionStore)
		default:
			root, err := DefaultSessionRoot()
			if err != nil {
				return o, err
			}
			o.SessionStore = root
		}
	}
	if o.SDKCommand == "" {
		if len(o.SDKArgs) > 0 {
			return o, fmt.Errorf("app: sdk args %q given without an sdk command", o.SDKArgs)
		}
		cmd, args, err := DefaultSDKCommand(o.PresetsFile)
		if err != nil {
			return o, err
		}
		o.SDKCommand, o.SDKArgs = cmd, args
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = activities.DefaultHeartbeatInterval
		if v := os.Getenv(EnvHeartbeatInterval); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return o, fmt.Errorf("app: $%s: %w", EnvHeartbeatInterval, err)
			}
			o.HeartbeatInterval = d
		}
	}
	if o.HeartbeatInterval < 0 || o.HeartbeatInterval > activities.DefaultHeartbeatInterval {
		return o, fmt.Errorf("app: heartbeat interval %v must be positive and at most %v (a cancel reaches a drive within one interval)",
			o.HeartbeatInterval, activities.DefaultHeartbeatInterval)
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Workflows == nil {
		o.Workflows = registerWorkflows
	}
	if o.DeploymentName == "" {
		o.DeploymentName = os.Getenv(EnvDeploymentName)
	}
	if !o.MakeCurrent {
		o.MakeCurrent = os.Getenv(EnvMakeCurrent) == "true"
	}
	if o.DeploymentName == "" {
		return o, nil
	}
	if err := validDeploymentName(o.DeploymentName); err != nil {
		return o, err
	}
	o.BuildID = DefaultBuildID(o.BuildID)
	if o.BuildID == "" {
		return o, fmt.Errorf("app: deployment %s needs a build id: this binary records no module version or VCS revision (built from a checkout with -buildvcs=false, or with go run); give --build-id or $%s",
			o.DeploymentName, EnvBuildID)
	}
	return o, nil
}

// registerWorkflows registers subflow's workflows as New's workers run them: with the
// interactive lane, which New polls beside each queue. Replay replays with the same.
func registerWorkflows(r worker.WorkflowRegistry) {
	workflows.RegisterWithOptions(r, workflows.RegisterOptions{InteractiveLane: true})
}
