package activities_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/workflows"
)

// TestBatchOwnsItsTasksParents: storing a page, as retaining the inline tasks, makes the
// batch's workflow an owner of each existing parent session its tasks name, once; a parent
// that does not exist gets no owner record, so nothing is created for it.
func TestBatchOwnsItsTasksParents(t *testing.T) {
	f := newFixture(t)
	const inline = "inline-parent"
	require.NoError(t, f.store.Create(context.Background(), session.Header{ID: inline, Cwd: f.cwd}))
	e := newEnv(t, f.activities(), worker.Options{})
	tasks := []workflows.Task{{Task: "a", Parent: parentID}, {Task: "b", Parent: "no-such-session"}, {Task: "c", Parent: parentID}, {Task: "d"}}
	_, err := e.ExecuteActivity(workflows.ActivitySaveBatchPage, workflows.BatchPageInput{BatchID: "b1", Page: 0, Tasks: tasks})
	require.NoError(t, err)
	_, err = e.ExecuteActivity(workflows.ActivityRetainTaskParents, workflows.RetainTaskParentsInput{BatchID: "b1", Sessions: []string{inline, "no-such-session"}})
	require.NoError(t, err)

	owned, err := f.store.Owned(context.Background(), session.OwnedQuery{Before: time.Now().Add(time.Hour), Limit: 100})
	require.NoError(t, err)
	owners := map[string][]string{}
	for _, o := range owned {
		owners[o.ID] = o.Owners
	}
	assert.Len(t, owners[parentID], 1, "the page's parent is owned, by the batch's workflow, once: %+v", owned)
	assert.Len(t, owners[inline], 1, "the inline tasks' parent is owned: %+v", owned)
	assert.NotContains(t, owners, "no-such-session")
	_, err = os.Stat(filepath.Join(f.root, "no-such-session"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no stub for a parent that does not exist")
}
