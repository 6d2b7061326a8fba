package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session/blob"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/workflows"
)

// TestBatchPagesRoundTrip stores pages of a batch in a real file store: every load returns
// its page, a second save keeps the first copy, and removal leaves a missing page a
// non-retryable error naming the page and the batch.
func TestBatchPagesRoundTrip(t *testing.T) {
	store, err := filestore.New(t.TempDir())
	require.NoError(t, err)
	a := &Activities{store: store, blobs: blob.New(store, nil)}
	ctx := context.Background()
	pages := [][]workflows.Task{{{Task: "a"}, {Task: "b", Label: "l"}}, {{Task: "c"}}}
	for n, tasks := range pages {
		require.NoError(t, a.SaveBatchPage(ctx, workflows.BatchPageInput{BatchID: "b1", Page: n, Tasks: tasks}))
	}
	require.NoError(t, a.SaveBatchPage(ctx, workflows.BatchPageInput{BatchID: "b1", Page: 0, Tasks: []workflows.Task{{Task: "other"}}}))
	for n, want := range pages {
		got, err := a.LoadBatchPage(ctx, workflows.BatchPageInput{BatchID: "b1", Page: n})
		require.NoError(t, err)
		assert.Equal(t, want, got, "page %d", n)
	}
	_, err = a.LoadBatchPage(ctx, workflows.BatchPageInput{BatchID: "b2", Page: 0})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "another batch's page 0 is not this one's")

	require.NoError(t, a.RemoveBatchPages(ctx, workflows.BatchPageInput{BatchID: "b1", Page: 2}))
	_, err = a.LoadBatchPage(ctx, workflows.BatchPageInput{BatchID: "b1", Page: 1})
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, TypeBatchPage, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, "activities: page 1 of batch b1 is not in the session store", appErr.Message())
}
