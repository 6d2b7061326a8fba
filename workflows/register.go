package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers the workflows of this package on r under their names (WorkflowName,
// BatchWorkflowName, FetchPayloadWorkflowName, FetchTranscriptWorkflowName,
// AdmissionWorkflowName, CleanupWorkflowName),
// so a worker registers them in one line. It is RegisterWithOptions with the zero
// RegisterOptions: every drive runs on its run's task queue.
//
// Every workflow is Pinned on a worker of a Worker Deployment (docs/deployment.md): a run
// finishes on the build that started it, so a changed workflow ships as a new build and needs
// no patch. The batch and admission workflows live for hours or for ever: when the
// deployment's current version moves past the build a run is pinned to, the run continues as
// new at its next safe point (upgradeDue), and the next run starts on the new build
// (continueAsNew) once the new build's workers poll its queue (buildMove). No build ever
// replays another build's history. On an unversioned worker the behaviors are not used.
func Register(r worker.WorkflowRegistry) {
	RegisterWithOptions(r, RegisterOptions{})
}

// RegisterOptions are what a worker tells the workflows it registers about itself.
type RegisterOptions struct {
	// InteractiveLane says that the worker polls the interactive lane of each task queue it
	// registers the workflows on (InteractiveQueue), with the activities registered: the runs
	// it executes then drive there when they are interactive (Interactive). worker/app's
	// workers do, with activity slots of their own and the workflows registered there too,
	// so a person's run never waits for a slot a batch's drive holds. A worker that sets it
	// without polling the lane leaves those drives unstarted.
	InteractiveLane bool
}

// RegisterWithOptions is Register for a worker that says more about itself (RegisterOptions).
func RegisterWithOptions(r worker.WorkflowRegistry, opts RegisterOptions) {
	pinned := workflow.VersioningBehaviorPinned
	start := StartSubagent
	if opts.InteractiveLane {
		start = func(ctx workflow.Context, in StartInput) (Outcome, error) { return startSubagent(ctx, in, true) }
	}
	r.RegisterWorkflowWithOptions(start, workflow.RegisterOptions{Name: WorkflowName, VersioningBehavior: pinned})
	r.RegisterWorkflowWithOptions(Batch, workflow.RegisterOptions{Name: BatchWorkflowName, VersioningBehavior: pinned})
	r.RegisterWorkflowWithOptions(FetchPayload, workflow.RegisterOptions{Name: FetchPayloadWorkflowName, VersioningBehavior: pinned})
	r.RegisterWorkflowWithOptions(FetchTranscript, workflow.RegisterOptions{Name: FetchTranscriptWorkflowName, VersioningBehavior: pinned})
	r.RegisterWorkflowWithOptions(ModelAdmission, workflow.RegisterOptions{Name: AdmissionWorkflowName, VersioningBehavior: pinned})
	r.RegisterWorkflowWithOptions(Cleanup, workflow.RegisterOptions{Name: CleanupWorkflowName, VersioningBehavior: pinned})
}

// upgradeDue reports whether the deployment's target version is no longer the build this
// Pinned run is on (the server says so on each workflow task): a long-lived run should
// continue as new, which moves it to the new build.
func upgradeDue(ctx workflow.Context) bool {
	return workflow.GetInfo(ctx).GetTargetWorkerDeploymentVersionChanged()
}

// continueAsNew continues the run as new as workflow name with arg, on the build behavior
// names (buildMove.settle decides it): a long-lived workflow moves to a new build only here,
// where its state is carried in arg.
func continueAsNew(ctx workflow.Context, behavior workflow.ContinueAsNewVersioningBehavior, name string, arg any) error {
	return workflow.NewContinueAsNewErrorWithOptions(ctx, workflow.ContinueAsNewErrorOptions{
		InitialVersioningBehavior: behavior,
	}, name, arg)
}
