package activities

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/blob"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/subagent"
	"github.com/subflow-dev/subflow/workflows"
)

// TestBigResultByReference: a result over the threshold is stored in chunks and replaced by
// a reference that ReadPayload and a batch's results file turn back into the whole result.
func TestBigResultByReference(t *testing.T) {
	store, err := filestore.New(t.TempDir())
	require.NoError(t, err)
	a := &Activities{store: store, blobs: blob.New(store, nil)}
	ctx := context.Background()
	text := strings.Repeat("big answer ", workflows.PayloadThreshold/5)
	out := workflows.Outcome{ChildID: "c1", Result: subagent.Result{
		Output: []session.Block{session.Text(text)}, StopReason: subagent.StopCompleted,
	}}
	require.NoError(t, a.byReference(ctx, &out))
	require.NotNil(t, out.ResultRef)
	assert.Empty(t, out.Result.Output)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Greater(t, out.ResultRef.Chunks, 1)

	raw, err := a.ReadPayload(ctx, workflows.ReadPayloadInput{Ref: *out.ResultRef, Count: out.ResultRef.Chunks})
	require.NoError(t, err)
	var back subagent.Result
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, text, session.JoinText(back.Output))

	small := workflows.Outcome{ChildID: "c2", Result: subagent.Result{Output: []session.Block{session.Text("hi")}}}
	require.NoError(t, a.byReference(ctx, &small))
	assert.Nil(t, small.ResultRef, "a small result stays inline")
}
