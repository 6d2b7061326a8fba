package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers the workflows of this package on r under their names (WorkflowName,
// BatchWorkflowName, FetchPayloadWorkflowName, AdmissionWorkflowName), so a worker registers
// them in one line.
//
// The versioning behaviors apply on a worker of a Worker Deployment (docs/deployment.md):
// StartSubagent and FetchPayload are Pinned, a run finishes on the build that started it, so
// a changed StartSubagent ships as a new build and needs no patch. The batch and admission
// workflows live for hours or for ever and are AutoUpgrade: they move to the deployment's
// current version at their next workflow task, where the new build replays their history
// since their last continue-as-new — what the replay gate (`worker replay`) checks before a
// version is made current. On an unversioned worker the behaviors are not used.
func Register(r worker.WorkflowRegistry) {
	pinned := workflow.VersioningBehaviorPinned
	upgrade := workflow.VersioningBehaviorAutoUpgrade
	r.RegisterWorkflowWithOptions(StartSubagent, workflow.RegisterOptions{Name: WorkflowName, VersioningBehavior: pinned})
	r.RegisterWorkflowWithOptions(Batch, workflow.RegisterOptions{Name: BatchWorkflowName, VersioningBehavior: upgrade})
	r.RegisterWorkflowWithOptions(FetchPayload, workflow.RegisterOptions{Name: FetchPayloadWorkflowName, VersioningBehavior: pinned})
	r.RegisterWorkflowWithOptions(ModelAdmission, workflow.RegisterOptions{Name: AdmissionWorkflowName, VersioningBehavior: upgrade})
	r.RegisterWorkflowWithOptions(Cleanup, workflow.RegisterOptions{Name: CleanupWorkflowName, VersioningBehavior: pinned})
}
