package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers the workflows of this package on r under their names (WorkflowName,
// BatchWorkflowName, FetchPayloadWorkflowName, AdmissionWorkflowName), so a worker registers
// them in one line.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(StartSubagent, workflow.RegisterOptions{Name: WorkflowName})
	r.RegisterWorkflowWithOptions(Batch, workflow.RegisterOptions{Name: BatchWorkflowName})
	r.RegisterWorkflowWithOptions(FetchPayload, workflow.RegisterOptions{Name: FetchPayloadWorkflowName})
	r.RegisterWorkflowWithOptions(ModelAdmission, workflow.RegisterOptions{Name: AdmissionWorkflowName})
	r.RegisterWorkflowWithOptions(Cleanup, workflow.RegisterOptions{Name: CleanupWorkflowName})
}
