package subflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	tclient "go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// FetchPayload reads the payload ref names through FetchPayload workflows on taskQueue
// (workflows.TaskQueue when empty), one per workflows.FetchChunks chunks, which the default
// workflow lists do not show (workflows.HiddenDivision).
func FetchPayload(ctx context.Context, c tclient.Client, taskQueue string, ref workflows.PayloadRef) ([]byte, error) {
	if taskQueue == "" {
		taskQueue = workflows.TaskQueue
	}
	data := make([]byte, 0, ref.Size)
	for from := 0; from < ref.Chunks; from += workflows.FetchChunks {
		in := workflows.ReadPayloadInput{Ref: ref, From: from, Count: min(workflows.FetchChunks, ref.Chunks-from)}
		run, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{
			ID:                       workflows.ReservedIDPrefix + "fetch-" + ref.ID + "-" + uuid.NewString(),
			TaskQueue:                taskQueue,
			WorkflowExecutionTimeout: time.Minute,
			StaticSummary:            fmt.Sprintf("fetch part of payload %s", ref.ID),
			// Out of the user's list: one fetch per MiB of every big result would otherwise
			// fill it between the user's own runs (docs/durability.md).
			TypedSearchAttributes: hidden,
		}, workflows.FetchPayloadWorkflowName, in)
		if err != nil {
			return nil, fmt.Errorf("subflow: fetch payload %s: %w", ref.ID, err)
		}
		var part []byte
		if err := run.Get(ctx, &part); err != nil {
			return nil, fmt.Errorf("subflow: fetch payload %s: %w", ref.ID, err)
		}
		data = append(data, part...)
	}
	if int64(len(data)) != ref.Size {
		return nil, fmt.Errorf("subflow: fetch payload %s: got %d bytes, want %d", ref.ID, len(data), ref.Size)
	}
	return data, nil
}

// FetchTranscript reads the transcript of a run through a FetchTranscript workflow on
// taskQueue (workflows.TaskQueue when empty), on a worker that reaches the session store: for
// a caller that does not. missing is true when the store no longer holds the run's session.
func FetchTranscript(ctx context.Context, c tclient.Client, taskQueue string, in workflows.TranscriptInput) (tr *subagent.Transcript, missing bool, err error) {
	if taskQueue == "" {
		taskQueue = workflows.TaskQueue
	}
	run, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{
		ID:                       workflows.ReservedIDPrefix + "transcript-" + in.ChildID + "-" + uuid.NewString(),
		TaskQueue:                taskQueue,
		WorkflowExecutionTimeout: time.Minute,
		StaticSummary:            fmt.Sprintf("read the transcript of %s", in.ChildID),
		TypedSearchAttributes:    hidden,
	}, workflows.FetchTranscriptWorkflowName, in)
	if err != nil {
		return nil, false, fmt.Errorf("subflow: fetch the transcript of %s: %w", in.ChildID, err)
	}
	var res workflows.TranscriptResult
	if err := run.Get(ctx, &res); err != nil {
		return nil, false, fmt.Errorf("subflow: fetch the transcript of %s: %w", in.ChildID, err)
	}
	switch {
	case res.Missing:
		return nil, true, nil
	case res.Ref != nil:
		raw, err := FetchPayload(ctx, c, taskQueue, *res.Ref)
		if err != nil {
			return nil, false, err
		}
		tr = &subagent.Transcript{}
		if err := json.Unmarshal(raw, tr); err != nil {
			return nil, false, fmt.Errorf("subflow: decode the transcript of %s: %w", in.ChildID, err)
		}
		return tr, false, nil
	case res.Transcript == nil:
		return nil, false, fmt.Errorf("subflow: fetch the transcript of %s: the worker returned none", in.ChildID)
	}
	return res.Transcript, false, nil
}

// ResolveOutcome replaces the result reference of out, if any, by the result it names,
// fetched through FetchPayload workflows on taskQueue (workflows.TaskQueue when empty), which
// the default workflow lists do not show (workflows.HiddenDivision). The stop reason stays the
// one out carries.
func ResolveOutcome(ctx context.Context, c tclient.Client, taskQueue string, out *workflows.Outcome) error {
	ref := out.ResultRef
	if ref == nil {
		return nil
	}
	data, err := FetchPayload(ctx, c, taskQueue, *ref)
	if err != nil {
		return err
	}
	stop := out.Result.StopReason
	if err := json.Unmarshal(data, &out.Result); err != nil {
		return fmt.Errorf("subflow: decode result %s: %w", ref.ID, err)
	}
	out.Result.StopReason = stop
	out.ResultRef = nil
	return nil
}
