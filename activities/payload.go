package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/blob"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// payloadChunkEvent is the event type of one chunk of a stored payload.
const payloadChunkEvent = "payload/chunk"

// typePayloadMissing is the non-retryable error type of a read of a payload the store does
// not hold (removed, or a reference from another store).
const typePayloadMissing = "payload-missing"

// byReference moves the result of out into the session store when its encoding exceeds
// workflows.PayloadThreshold, leaving only the stop reason and a reference in out, so a big
// answer never fails the run for its size (see workflows.PayloadRef).
func (a *Activities) byReference(ctx context.Context, out *workflows.Outcome) error {
	raw, err := json.Marshal(out.Result)
	if err != nil {
		return fmt.Errorf("activities: encode result of %s: %w", out.ChildID, err)
	}
	if len(raw) <= workflows.PayloadThreshold {
		return nil
	}
	ref, err := a.storePayload(ctx, "payload-"+out.ChildID, raw)
	if err != nil {
		return err
	}
	out.Result = subagent.Result{StopReason: out.Result.StopReason}
	out.ResultRef = &ref
	return nil
}

// storePayload writes data as the payload blob id, replacing what a failed earlier attempt
// may have left, and returns its reference.
func (a *Activities) storePayload(ctx context.Context, id string, data []byte) (workflows.PayloadRef, error) {
	chunks, err := a.blobs.Put(ctx, id, payloadChunkEvent, data, workflows.PayloadChunk)
	if err != nil {
		return workflows.PayloadRef{}, fmt.Errorf("activities: store payload %s: %w", id, err)
	}
	return workflows.PayloadRef{ID: id, Size: int64(len(data)), Chunks: chunks}, nil
}

// ReadPayload returns chunks [in.From, in.From+in.Count) of a stored payload, concatenated.
func (a *Activities) ReadPayload(ctx context.Context, in workflows.ReadPayloadInput) ([]byte, error) {
	data, err := a.blobs.Get(ctx, in.Ref.ID, payloadChunkEvent, in.From, in.Count)
	var outside *blob.RangeError
	var notChunk *blob.ChunkError
	switch {
	case errors.Is(err, session.ErrNotFound):
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("activities: read payload %s: not in the session store", in.Ref.ID), typePayloadMissing, nil)
	case errors.As(err, &outside):
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("activities: read payload %s: chunks %d+%d out of %d",
			in.Ref.ID, in.From, in.Count, outside.Chunks), typePayloadMissing, nil)
	case errors.As(err, &notChunk):
		return nil, fmt.Errorf("activities: read payload %s: event %d is no payload chunk", in.Ref.ID, notChunk.Seq)
	case err != nil:
		return nil, fmt.Errorf("activities: read payload %s: %w", in.Ref.ID, err)
	}
	return data, nil
}

// StorePayload stores in.Data as the payload session in.ID (see workflows.StorePayloadInput).
func (a *Activities) StorePayload(ctx context.Context, in workflows.StorePayloadInput) (workflows.PayloadRef, error) {
	return a.storePayload(ctx, in.ID, in.Data)
}

// resolveRequest replaces *req, when ref names the stored whole request, by that request,
// keeping the parent *req carries: the workflow fills it in after storing the request.
func (a *Activities) resolveRequest(ctx context.Context, req *subagent.Request, ref *workflows.PayloadRef) error {
	if ref == nil {
		return nil
	}
	raw, err := a.ReadPayload(ctx, workflows.ReadPayloadInput{Ref: *ref, Count: ref.Chunks})
	if err != nil {
		return err
	}
	var full subagent.Request
	if err := json.Unmarshal(raw, &full); err != nil {
		return fmt.Errorf("activities: decode request %s: %w", ref.ID, err)
	}
	full.Parent = req.Parent
	*req = full
	return nil
}

// inlineResult returns the result of out, read from the session store when out carries it by
// reference.
func (a *Activities) inlineResult(ctx context.Context, out workflows.Outcome) (subagent.Result, error) {
	if out.ResultRef == nil {
		return out.Result, nil
	}
	ref := *out.ResultRef
	raw, err := a.ReadPayload(ctx, workflows.ReadPayloadInput{Ref: ref, Count: ref.Chunks})
	if err != nil {
		return subagent.Result{}, err
	}
	var r subagent.Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return subagent.Result{}, fmt.Errorf("activities: decode result %s: %w", ref.ID, err)
	}
	r.StopReason = out.Result.StopReason
	return r, nil
}
