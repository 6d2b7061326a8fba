package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/sdkproc"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TypeTranscriptWithheld is the non-retryable error type of ReadTranscript on a worker whose
// digest level is not full.
const TypeTranscriptWithheld = "transcript-withheld"

// ReadTranscript returns the transcript of a run (workflows.TranscriptInput): an in-process
// run's from its session in the store, an sdk run's from the events its runtime reported,
// which RunSDKChild stored. A transcript whose encoding exceeds workflows.PayloadThreshold is
// stored as a payload and returned by reference; a session the store no longer holds is
// reported Missing. A worker whose digest level is names or off refuses it
// (TypeTranscriptWithheld): the transcript would enter the fetching workflow's history.
func (a *Activities) ReadTranscript(ctx context.Context, in workflows.TranscriptInput) (workflows.TranscriptResult, error) {
	if a.digest != subagent.DigestFull {
		// What it returns enters the fetching workflow's history: tool inputs and outputs
		// that the operator keeps out of Temporal's.
		return workflows.TranscriptResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"activities: read the transcript of %s: this worker's digest level is %s, which keeps tool inputs out of Temporal; read the session store directly (starter transcript --session-root)",
			in.ChildID, a.digest), TypeTranscriptWithheld, nil)
	}
	events, err := a.transcriptEvents(ctx, in)
	if errors.Is(err, session.ErrNotFound) {
		return workflows.TranscriptResult{Missing: true}, nil
	}
	if err != nil {
		return workflows.TranscriptResult{}, err
	}
	cut := subagent.DefaultTranscriptCut
	if in.Full {
		cut = 0
	}
	tr := subagent.BuildTranscript(in.ChildID, events, cut)
	raw, err := json.Marshal(tr)
	if err != nil {
		return workflows.TranscriptResult{}, fmt.Errorf("activities: encode the transcript of %s: %w", in.ChildID, err)
	}
	if len(raw) <= workflows.PayloadThreshold {
		return workflows.TranscriptResult{Transcript: &tr}, nil
	}
	// Owned by this fetch's workflow: the retention cleanup removes it after the fetch.
	ref, err := a.storePayload(ctx, "transcript-read-"+uuid.NewString(), raw)
	if err != nil {
		return workflows.TranscriptResult{}, err
	}
	return workflows.TranscriptResult{Ref: &ref}, nil
}

// transcriptEvents returns the events of run in.ChildID's own turn; session.ErrNotFound when
// the store does not hold them.
func (a *Activities) transcriptEvents(ctx context.Context, in workflows.TranscriptInput) ([]session.Event, error) {
	if !subagent.IsRemote(in.Provider) {
		hd, events, err := a.store.Load(ctx, in.ChildID)
		if err != nil {
			return nil, fmt.Errorf("activities: read the transcript of %s: %w", in.ChildID, err)
		}
		return events[min(hd.SeedLength, int64(len(events))):], nil
	}
	id := workflows.SDKTranscriptID(in.ChildID)
	_, chunks, err := a.store.Load(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("activities: read the transcript of sdk run %s: %w", in.ChildID, err)
	}
	raw, err := a.blobs.Get(ctx, id, payloadChunkEvent, 0, len(chunks))
	if err != nil {
		return nil, fmt.Errorf("activities: read the transcript of sdk run %s: %w", in.ChildID, err)
	}
	var events []session.Event
	if err := json.Unmarshal(raw, &events); err != nil {
		return nil, fmt.Errorf("activities: decode the transcript of sdk run %s: %w", in.ChildID, err)
	}
	return events, nil
}

// keepSDKTranscript stores what the runtime reported of run runID, for ReadTranscript. A
// failure is logged, not returned: the run's outcome does not depend on it.
func (a *Activities) keepSDKTranscript(ctx context.Context, log *zap.Logger, runID string, run *sdkproc.Run) {
	raw, err := json.Marshal(run.Events())
	if err == nil {
		_, err = a.storePayload(ctx, workflows.SDKTranscriptID(runID), raw)
	}
	if err != nil {
		log.Warn("keep the sdk child's transcript", zap.Error(err))
	}
}
