package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/subflow-dev/subflow/workflows"
)

// acceptTimeout bounds the wait for a limiter to accept an acquire. A ModelAdmission accepts
// in its next workflow task; a workflow of another type under the limiter's id may never
// answer (no worker polls its queue), and the acquire then checks who holds the id.
const acceptTimeout = 30 * time.Second

// TypeIDTaken is the error type of a model request whose provider's limiter id is
// held by a workflow that is not a limiter.
const TypeIDTaken = "admission-id-taken"

// ErrIDTaken is wrapped by the error of an acquire whose limiter id is held by a
// running workflow of another type: started by hand (the temporal CLI, a user's own client),
// since subflow refuses its reserved ids to user runs (workflows.CheckUserWorkflowID). The
// request fails at once, naming the holder, instead of waiting until the holder ends.
var ErrIDTaken = errors.New("the admission workflow id is taken")

// squatter returns an error wrapping ErrIDTaken when the running workflow id is not
// a ModelAdmission, nil otherwise (a limiter, none running, or the check itself failed: the
// acquire is then tried again as any refused one).
func (ad *admitter) squatter(ctx context.Context, id string) error {
	desc, err := ad.c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil // not found: nobody holds it; anything else: try again
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetType().GetName() == workflows.AdmissionWorkflowName {
		return nil
	}
	return fmt.Errorf("activities: admission: %w: %s is held by a running %s workflow (run %s, task queue %s), not by subflow's %s limiter; ids starting with %q are subflow's own: terminate that workflow to let model requests through",
		ErrIDTaken, id, info.GetType().GetName(), info.GetExecution().GetRunId(), info.GetTaskQueue(),
		workflows.AdmissionWorkflowName, workflows.ReservedIDPrefix)
}
