package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ActivityCheckTargetBuild is the activity a long-lived workflow runs before it moves to the
// deployment's new target build: whether workers of that build poll its task queue.
const ActivityCheckTargetBuild = "CheckTargetBuild"

// TargetBuildInput asks whether the build new runs of WorkflowType on TaskQueue start on can
// run them.
type TargetBuildInput struct {
	TaskQueue    string `json:"taskQueue"`
	WorkflowType string `json:"workflowType"`
	// BuildID is the asking run's build.
	BuildID string `json:"buildId"`
}

// TargetBuild is the answer to a TargetBuildInput.
type TargetBuild struct {
	// Target names the version new runs start on ("DEPLOYMENT:BUILD_ID", or "unversioned
	// workers").
	Target string `json:"target"`
	// Ready is true when a worker of Target polled the queue lately and, when its build
	// says which workflows it registers, registers WorkflowType.
	Ready bool `json:"ready"`
	// Reason says why Target is not ready.
	Reason string `json:"reason,omitempty"`
	// Own is true when Target is the asking run's build (with no ramp): there is nothing
	// to move to.
	Own bool `json:"own,omitempty"`
}

// buildRecheck is how long a run that found the target build not ready waits (for the next
// event it wakes up on) before it asks again: the workers of the new build may come.
const buildRecheck = 10 * time.Minute

// buildMove is a long-lived run's decision to move to the deployment's target build. Such a
// run moves only at continue-as-new, and only when the target build's workers poll its queue
// (and register its type, when they say): moving to a build without workers would stall the
// next run until some came, and a run that continued as new again and again to chase one
// would loop. So a run that finds the target not ready stays on its build, says so (Held,
// the Current Details line), and asks again after buildRecheck. The server tells a pinned
// run that the target changed (upgradeDue) until a run declines the move by continuing as
// new on its build; so the chain carries Held to its next run, which keeps asking while it
// is set, and moves (ContinueAsNewVersioningBehaviorAutoUpgrade) once the target is ready:
// at most once per change of the target version.
type buildMove struct {
	checked time.Time // workflow time of the last check in this run, zero before any
	ready   bool
	// Held is why the run stays on its build though the target version is another; ""
	// when it does not. The run hands it to its next run.
	Held string
	// show, when set, shows the run's Current Details with Held in them (the batch's page);
	// nil shows Details alone.
	show func(workflow.Context)
}

// pending reports, without blocking, whether the run should stop what it awaits to check
// the target (check) or to move: the target changed (or an earlier run of the chain was
// held), and it is ready or was not checked lately. For the conditions of workflow.Await.
func (m *buildMove) pending(ctx workflow.Context) bool {
	if !upgradeDue(ctx) && m.Held == "" {
		return false
	}
	return m.ready || m.checked.IsZero() || workflow.Now(ctx).Sub(m.checked) >= buildRecheck
}

// move reports whether the run should continue as new now to move to the target build,
// checking the target first when pending says so. It blocks for the check.
func (m *buildMove) move(ctx workflow.Context) bool {
	if ctx.Err() != nil || !m.pending(ctx) {
		return false // a cancelled run moves nowhere
	}
	if !m.ready {
		m.check(ctx)
	}
	return m.ready
}

// check asks ActivityCheckTargetBuild and records the answer. A check that fails counts as
// not ready: the run goes on where it is.
func (m *buildMove) check(ctx workflow.Context) {
	info := workflow.GetInfo(ctx)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
		Summary:             "check the workers of the deployment's new target build",
	})
	var tb TargetBuild
	err := workflow.ExecuteActivity(actx, ActivityCheckTargetBuild, TargetBuildInput{
		TaskQueue: info.TaskQueueName, WorkflowType: info.WorkflowType.Name, BuildID: info.GetCurrentBuildID(),
	}).Get(ctx, &tb)
	m.checked = workflow.Now(ctx)
	switch {
	case err == nil && tb.Own:
		m.ready, m.Held = false, "" // the target is this build again (a rollback)
	case err != nil:
		m.ready, m.Held = false, fmt.Sprintf("stays on build %s: the check of the new target build failed: %v", info.GetCurrentBuildID(), err)
	case tb.Ready:
		m.ready = true
	default:
		m.ready, m.Held = false, fmt.Sprintf("stays on build %s: the current version %s %s (checked %s, again every %v)",
			info.GetCurrentBuildID(), tb.Target, tb.Reason, m.checked.UTC().Format(time.RFC3339), buildRecheck)
	}
	workflow.GetLogger(ctx).Info("target build checked", "target", tb.Target, "ready", m.ready, "held", m.Held)
	if m.show != nil {
		m.show(ctx)
		return
	}
	workflow.SetCurrentDetails(ctx, m.Details())
}

// behavior is how the run continues as new: to the target build when it is ready (checked
// again now if the last check is old), else pinned to the run's own build.
func (m *buildMove) behavior(ctx workflow.Context) workflow.ContinueAsNewVersioningBehavior {
	if m.move(ctx) {
		return workflow.ContinueAsNewVersioningBehaviorAutoUpgrade
	}
	return workflow.ContinueAsNewVersioningBehaviorUnspecified
}

// settle awaits idle on idleCtx, then decides how the run continues as new (behavior), and
// returns once idle holds after the decision. The decision may wait for a check of the target
// build, during which the run's coroutines and handlers go on (a child ends, an update
// lands); so the caller takes the state it hands over after settle returns, with nothing
// left to change it: state taken before the check once handed over a child the run had
// already counted, and the next run counted it again. When idleCtx is cancelled, settle
// returns at once, and the caller sees its cancellation.
func (m *buildMove) settle(ctx, idleCtx workflow.Context, idle func() bool) workflow.ContinueAsNewVersioningBehavior {
	for {
		err := workflow.Await(idleCtx, idle)
		behavior := m.behavior(ctx)
		if err != nil || idle() {
			return behavior
		}
	}
}

// Details is the Current Details line of the run's build (the Web UI shows it): empty unless
// the run is held on its build.
func (m *buildMove) Details() string {
	if m.Held == "" {
		return ""
	}
	return "**Build**: " + m.Held
}
