package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/subagent"
)

// Names of the transcript workflow and activity.
const (
	FetchTranscriptWorkflowName = "FetchTranscript"
	ActivityReadTranscript      = "ReadTranscript"
)

// TranscriptInput is the input of FetchTranscript and ReadTranscript: the transcript of run
// ChildID of Provider (an sdk run's is the events its runtime reported, which RunSDKChild
// stored), each text, input and result cut at subagent.DefaultTranscriptCut unless Full.
type TranscriptInput struct {
	ChildID  string `json:"childId"`
	Provider string `json:"provider"`
	Full     bool   `json:"full,omitempty"`
}

// TranscriptResult is the result of ReadTranscript and FetchTranscript: the transcript,
// or a reference to it when its encoding exceeds PayloadThreshold (read it with
// subflow.FetchPayload), or Missing when the session store no longer holds the run's
// session (the retention cleanup removed it).
type TranscriptResult struct {
	Transcript *subagent.Transcript `json:"transcript,omitempty"`
	Ref        *PayloadRef          `json:"ref,omitempty"`
	Missing    bool                 `json:"missing,omitempty"`
}

// FetchTranscript reads a run's transcript on a worker with the ReadTranscript activity, for
// a caller (`starter transcript`) that cannot reach the session store; like FetchPayload, a
// short workflow keeps what it read in its own history, never in the run's.
func FetchTranscript(ctx workflow.Context, in TranscriptInput) (TranscriptResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: ShortTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 5,
		},
		Summary: fmt.Sprintf("read the transcript of %s child %s", in.Provider, short(in.ChildID)),
	})
	var res TranscriptResult
	err := workflow.ExecuteActivity(ctx, ActivityReadTranscript, in).Get(ctx, &res)
	return res, err
}

// SDKTranscriptID is the name of the blob in which RunSDKChild keeps the events the child
// runtime reported of run childID, for its transcript.
func SDKTranscriptID(childID string) string { return "transcript-" + childID }
