package subflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	tclient "go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/workflows"
)

// ResolveOutcome replaces the result reference of out, if any, by the result it names,
// fetched through FetchPayload workflows on taskQueue (workflows.TaskQueue when empty), which
// the default workflow lists do not show (workflows.HiddenDivision). The stop reason stays the
// one out carries.
func ResolveOutcome(ctx context.Context, c tclient.Client, taskQueue string, out *workflows.Outcome) error {
	ref := out.ResultRef
	if ref == nil {
		return nil
	}
	if taskQueue == "" {
		taskQueue = workflows.TaskQueue
	}
	data := make([]byte, 0, ref.Size)
	for from := 0; from < ref.Chunks; from += workflows.FetchChunks {
		in := workflows.ReadPayloadInput{Ref: *ref, From: from, Count: min(workflows.FetchChunks, ref.Chunks-from)}
		run, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{
			ID:                       workflows.ReservedIDPrefix + "fetch-" + ref.ID + "-" + uuid.NewString(),
			TaskQueue:                taskQueue,
			WorkflowExecutionTimeout: time.Minute,
			StaticSummary:            fmt.Sprintf("fetch part of result %s", ref.ID),
			// Out of the user's list: one fetch per MiB of every big result would otherwise
			// fill it between the user's own runs (docs/durability.md).
			TypedSearchAttributes: hidden,
		}, workflows.FetchPayloadWorkflowName, in)
		if err != nil {
			return fmt.Errorf("subflow: fetch result %s: %w", ref.ID, err)
		}
		var part []byte
		if err := run.Get(ctx, &part); err != nil {
			return fmt.Errorf("subflow: fetch result %s: %w", ref.ID, err)
		}
		data = append(data, part...)
	}
	if int64(len(data)) != ref.Size {
		return fmt.Errorf("subflow: fetch result %s: got %d bytes, want %d", ref.ID, len(data), ref.Size)
	}
	stop := out.Result.StopReason
	if err := json.Unmarshal(data, &out.Result); err != nil {
		return fmt.Errorf("subflow: decode result %s: %w", ref.ID, err)
	}
	out.Result.StopReason = stop
	out.ResultRef = nil
	return nil
}
