package activities

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/blob"
	"github.com/subflow-dev/subflow/workflows"
)

// TypeBatchPage is the type of the non-retryable ApplicationError of a stored batch page
// that is missing or unreadable.
const TypeBatchPage = "batch-page"

// eventBatchPage is the type of the one event of a stored batch page.
const eventBatchPage = "batch-page"

// batchPagePrefix starts the session id of every batch page.
const batchPagePrefix = "batchpage-"

// pageID is the session id of page n of batch: a name-based UUID, so a retried save and
// every load meet at the same session.
func pageID(batch string, n int) string {
	return batchPagePrefix + uuid.NewSHA1(uuid.NameSpaceURL, []byte("subflow:batch-page/"+batch+"/"+strconv.Itoa(n))).String()
}

// SaveBatchPage stores page in.Page of batch in.BatchID in the session store, durably, as
// a blob of its own. Saving a page again keeps the first copy.
// The batch becomes an owner of the parent sessions the page's tasks name first
// (RetainTaskParents), so they outlive the runs that wrote them while the batch runs.
func (a *Activities) SaveBatchPage(ctx context.Context, in workflows.BatchPageInput) error {
	if err := a.RetainTaskParents(ctx, workflows.RetainTaskParentsInput{
		BatchID: in.BatchID, Sessions: workflows.TaskParents(in.Tasks),
	}); err != nil {
		return err
	}
	err := a.blobs.PutValue(ctx, pageID(in.BatchID, in.Page), eventBatchPage, in.Tasks)
	var owner *ownerError
	switch {
	case errors.As(err, &owner):
		return err
	case err != nil:
		return fmt.Errorf("activities: store page %d of batch %s: %w", in.Page, in.BatchID, err)
	}
	return nil
}

// RetainTaskParents records the activity's workflow (the batch) as an owner of each session
// of in.Sessions that exists (docs/durability.md, "Retention"): the retention cleanup then
// keeps it while the batch runs, and for the retention after, whatever became of the runs
// that wrote it. A session that does not exist, or an id no store accepts, is skipped: the
// task naming it fails when it starts, with the reason, and no stub is left for it.
func (a *Activities) RetainTaskParents(ctx context.Context, in workflows.RetainTaskParentsInput) error {
	if _, ok := a.store.(session.Retainer); !ok {
		return nil
	}
	for _, id := range in.Sessions {
		if session.ValidateID(id) != nil {
			continue
		}
		_, _, err := a.store.Load(ctx, id)
		switch {
		case errors.Is(err, session.ErrNotFound):
			continue
		case err != nil:
			return fmt.Errorf("activities: retain parent session %s of batch %s: %w", id, in.BatchID, err)
		}
		if err := a.own(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// LoadBatchPage returns the tasks of page in.Page of batch in.BatchID. A missing page is a
// non-retryable error.
func (a *Activities) LoadBatchPage(ctx context.Context, in workflows.BatchPageInput) ([]workflows.Task, error) {
	var tasks []workflows.Task
	err := a.blobs.GetValue(ctx, pageID(in.BatchID, in.Page), &tasks)
	var undecodable *blob.DecodeError
	switch {
	case errors.Is(err, blob.ErrEmpty):
		err = nil // no cause: the page is there, its one event is not
		fallthrough
	case errors.Is(err, session.ErrNotFound):
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("activities: page %d of batch %s is not in the session store", in.Page, in.BatchID), TypeBatchPage, err)
	case errors.As(err, &undecodable):
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("activities: page %d of batch %s: %v", in.Page, in.BatchID, undecodable.Err), TypeBatchPage, nil)
	case err != nil:
		return nil, fmt.Errorf("activities: load page %d of batch %s: %w", in.Page, in.BatchID, err)
	}
	return tasks, nil
}

// RemoveBatchPages removes pages 0 … in.Page-1 of batch in.BatchID.
func (a *Activities) RemoveBatchPages(ctx context.Context, in workflows.BatchPageInput) error {
	for n := range in.Page {
		if err := a.blobs.Delete(ctx, pageID(in.BatchID, n)); err != nil {
			return fmt.Errorf("activities: remove page %d of batch %s: %w", n, in.BatchID, err)
		}
	}
	return nil
}

// AwaitChild waits for the workflow in.WorkflowID (a batch child started by an earlier run
// of its batch) to close and returns how it ended, heartbeating meanwhile so a lost worker
// is noticed and another worker takes the wait over.
func (a *Activities) AwaitChild(ctx context.Context, in workflows.AwaitChildInput) (workflows.ChildResult, error) {
	c := a.client(ctx)
	if c == nil {
		return workflows.ChildResult{}, errors.New("activities: await child: no client")
	}
	done := make(chan workflows.ChildResult, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var out workflows.Outcome
		err := c.GetWorkflow(wctx, in.WorkflowID, "").Get(wctx, &out)
		if wctx.Err() != nil {
			return
		}
		done <- workflows.ChildOutcome(out, err)
	}()
	tick := time.NewTicker(a.interval)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			return res, nil
		case <-tick.C:
			activity.RecordHeartbeat(ctx, "waiting for "+in.WorkflowID)
		case <-ctx.Done():
			return workflows.ChildResult{}, ctx.Err()
		}
	}
}
