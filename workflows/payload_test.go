package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// TestBigRequestIsStoredOnce: a request over PayloadThreshold is stored by one StorePayload
// call, and every later activity gets the reference and the request without its big fields.
func TestBigRequestIsStoredOnce(t *testing.T) {
	h := newHarness(t)
	var stored []StorePayloadInput
	h.env.RegisterActivityWithOptions(func(ctx context.Context, in StorePayloadInput) (PayloadRef, error) {
		h.fakes.record(ctx, ActivityStorePayload)
		stored = append(stored, in)
		return PayloadRef{ID: in.ID, Size: int64(len(in.Data)), Chunks: 2}, nil
	}, activity.RegisterOptions{Name: ActivityStorePayload})
	h.sendUpdate()
	in := spawnInput()
	in.Request.Prompt = []session.Block{session.Text(strings.Repeat("p", PayloadThreshold))}
	in.Request.OutputSchema = []byte(`{"type": "object"}`)
	h.run(t, in)
	require.NoError(t, h.env.GetWorkflowError())

	assert.Equal(t, []string{ActivityStorePayload, ActivityPublish, ActivityDrive, ActivityReadResult}, h.fakes.Calls())
	assert.Contains(t, h.fakes.Local(), ActivityStorePayload, "a local activity: history keeps no copy of its input")
	require.Len(t, stored, 1)
	assert.Equal(t, "request-child-1", stored[0].ID)
	assert.Contains(t, string(stored[0].Data), `"outputSchema":{"type":"object"}`)
	ref := &PayloadRef{ID: "request-child-1", Size: int64(len(stored[0].Data)), Chunks: 2}
	for _, got := range []struct {
		req subagent.Request
		ref *PayloadRef
	}{
		{h.fakes.publish[0].Request, h.fakes.publish[0].RequestRef},
		{h.fakes.drives[0].Request, h.fakes.drives[0].RequestRef},
		{h.fakes.reads[0].Request, h.fakes.reads[0].RequestRef},
	} {
		assert.Equal(t, ref, got.ref)
		assert.Empty(t, got.req.Prompt)
		assert.Empty(t, got.req.OutputSchema)
		assert.Equal(t, in.Request.Parent, got.req.Parent, "the parent travels inline")
	}
}

// TestSmallRequestTravelsInline: below the threshold nothing is stored.
func TestSmallRequestTravelsInline(t *testing.T) {
	h := newHarness(t)
	h.sendUpdate()
	h.run(t, spawnInput())
	require.NoError(t, h.env.GetWorkflowError())
	assert.Nil(t, h.fakes.drives[0].RequestRef)
	assert.NotContains(t, h.fakes.Calls(), ActivityStorePayload)
}

// TestTimeoutAbortsTheDrive: when the run's Timeout passes the drive is cancelled like a
// cancel of the workflow would, the result is read as cancelled, and the run completes with
// the aborted outcome.
func TestTimeoutAbortsTheDrive(t *testing.T) {
	h := newHarness(t)
	park := blockUntilCancelled(t)
	h.fakes.onDrive = func(ctx context.Context, _ ChildInput) (DriveSummary, error) {
		park(ctx)
		return DriveSummary{}, ctx.Err()
	}
	h.sendUpdate()
	in := spawnInput()
	in.Timeout = Duration(time.Millisecond) // the test clock only skips ahead while no activity runs
	h.run(t, in)

	require.NoError(t, h.env.GetWorkflowError(), "a run past its deadline completes")
	var out Outcome
	require.NoError(t, h.env.GetWorkflowResult(&out))
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
	assert.Equal(t, "partial", session.JoinText(out.Result.Output))
	require.Len(t, h.fakes.reads, 1)
	assert.True(t, h.fakes.reads[0].Cancelled)
}
