package activities

import (
	"context"

	"github.com/subflow-dev/subflow"
	"github.com/subflow-dev/subflow/workflows"
)

// CheckTargetBuild answers whether the build new runs of in.WorkflowType on in.TaskQueue
// would start on can run them (subflow.TargetReady): the batch, admission and cleanup
// workflows ask before they continue as new onto a new build.
func (a *Activities) CheckTargetBuild(ctx context.Context, in workflows.TargetBuildInput) (workflows.TargetBuild, error) {
	c := a.client(ctx)
	q, err := subflow.ReadQueueVersions(ctx, c, in.TaskQueue)
	if err != nil {
		return workflows.TargetBuild{}, err
	}
	return subflow.TargetReady(ctx, c, q, in), nil
}
