package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Payloads of any size. Temporal refuses a payload over 2 MiB, and every payload is kept in
// history. A result whose encoding exceeds PayloadThreshold therefore travels by reference:
// the activity that produced it (ReadResult, RunSDKChild) writes it into the session store,
// which every worker can read, as a payload session of PayloadChunk-sized chunks, and the
// Outcome carries a PayloadRef instead of the output and the structured value.
//
// A caller resolves the reference through Temporal, never through the store, since a
// starter may run on a host without store access: subflow.ResolveOutcome runs FetchPayload
// workflows, each of which reads at most FetchChunks chunks through the ReadPayload activity
// on a worker and returns them. A closed run cannot take updates and a query cannot run an
// activity, hence a short workflow per fetch; each keeps its bytes in its own history, under
// the payload limit, never in the run's.
const (
	// PayloadThreshold is the largest encoded result an Outcome carries inline.
	PayloadThreshold = 256 << 10
	// PayloadChunk is the size of one stored chunk of a payload.
	PayloadChunk = 256 << 10
	// FetchChunks is the number of chunks one FetchPayload returns (1 MiB).
	FetchChunks = 4
	// MaxStartInputBytes bounds the encoded StartInput a caller may start a run with: it
	// travels as one payload, which Temporal limits to 2 MiB; the rest is headroom for the
	// payload's metadata and the request's envelope.
	MaxStartInputBytes = 2<<20 - 64<<10
)

// Names of the payload workflow and activities.
const (
	FetchPayloadWorkflowName = "FetchPayload"
	ActivityReadPayload      = "ReadPayload"
	ActivityStorePayload     = "StorePayload"
)

// StorePayloadInput is the input of StorePayload: store the JSON value Data as the payload
// session ID, replacing what an earlier attempt left. The activity returns its PayloadRef.
// Data is raw JSON rather than bytes so that history holds it as is, not base64-encoded.
type StorePayloadInput struct {
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storeRequest stores a request whose encoding exceeds PayloadThreshold through
// StorePayload, once, and strips its big fields (prompt, schema, persona) from r.in.Request:
// the activities read the whole request back by r.requestRef. StorePayload is a step like
// Publish (a local activity, whose input history does not keep), so a 1.5 MB schema is in history once, the workflow input, rather than once per
// activity. Smaller requests are left as they are and add no command.
func (r *run) storeRequest(ctx workflow.Context, childID string) error {
	raw, err := json.Marshal(r.in.Request)
	if err != nil {
		return fmt.Errorf("encode the request: %w", err)
	}
	if len(raw) <= PayloadThreshold {
		return nil
	}
	var ref PayloadRef
	err = r.step(ctx, ActivityStorePayload, r.activitySummary("store request of"),
		StorePayloadInput{ID: "request-" + childID, Data: raw}, &ref)
	if err != nil {
		return err
	}
	r.requestRef = &ref
	r.in.Request.Prompt, r.in.Request.OutputSchema, r.in.Request.Persona = nil, nil, ""
	return nil
}

// PayloadRef names a payload stored in the session store: the payload session ID, its size
// in bytes and its number of chunks.
type PayloadRef struct {
	ID     string `json:"id"`
	Size   int64  `json:"size"`
	Chunks int    `json:"chunks"`
}

// ReadPayloadInput is the input of ReadPayload and of FetchPayload: chunks [From,
// From+Count) of Ref. ReadPayload returns their bytes, concatenated.
type ReadPayloadInput struct {
	Ref   PayloadRef `json:"ref"`
	From  int        `json:"from"`
	Count int        `json:"count"`
}

// FetchPayload returns chunks of a stored payload, read by the ReadPayload activity.
func FetchPayload(ctx workflow.Context, in ReadPayloadInput) ([]byte, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: ShortTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 5,
		},
		Summary: fmt.Sprintf("read chunks %d-%d of %s", in.From, in.From+in.Count-1, in.Ref.ID),
	})
	var data []byte
	err := workflow.ExecuteActivity(ctx, ActivityReadPayload, in).Get(ctx, &data)
	return data, err
}
