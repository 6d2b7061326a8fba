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
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/workflows"
)

// TypeBatchPage is the type of the non-retryable ApplicationError of a stored batch page
// that is missing or unreadable.
const TypeBatchPage = "batch-page"

// eventBatchPage is the type of the one event of a stored batch page.
const eventBatchPage = "batch-page"

// pageCwd is the cwd of a page's session header: pages are data, not agent sessions, but
// every header needs an absolute cwd.
const pageCwd = "/"

// registerBatch registers the activities of the Batch workflow.
func registerBatch(r worker.ActivityRegistry, a *Activities) {
	for name, fn := range map[string]any{
		workflows.ActivitySaveBatchPage:    a.SaveBatchPage,
		workflows.ActivityLoadBatchPage:    a.LoadBatchPage,
		workflows.ActivityRemoveBatchPages: a.RemoveBatchPages,
		workflows.ActivityAwaitChild:       a.AwaitChild,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

// batchPagePrefix starts the session id of every batch page.
const batchPagePrefix = "batchpage-"

// pageID is the session id of page n of batch: a name-based UUID, so a retried save and
// every load meet at the same session.
func pageID(batch string, n int) string {
	return batchPagePrefix + uuid.NewSHA1(uuid.NameSpaceURL, []byte("subflow:batch-page/"+batch+"/"+strconv.Itoa(n))).String()
}

// SaveBatchPage stores page in.Page of batch in.BatchID in the session store, durably, as
// one event of a session of its own. Saving a page again keeps the first copy.
func (a *Activities) SaveBatchPage(ctx context.Context, in workflows.BatchPageInput) error {
	id := pageID(in.BatchID, in.Page)
	if err := a.own(ctx, id); err != nil {
		return err
	}
	if err := a.store.Create(ctx, session.Header{ID: id, Cwd: pageCwd}); err != nil {
		return fmt.Errorf("activities: store page %d of batch %s: %w", in.Page, in.BatchID, err)
	}
	_, events, err := a.store.Load(ctx, id)
	if err != nil {
		return fmt.Errorf("activities: store page %d of batch %s: %w", in.Page, in.BatchID, err)
	}
	if len(events) > 0 {
		return nil
	}
	ev, err := session.NewEvent(eventBatchPage, in.Tasks)
	if err != nil {
		return fmt.Errorf("activities: store page %d of batch %s: %w", in.Page, in.BatchID, err)
	}
	if err := a.store.Append(ctx, id, ev); err != nil && !errors.Is(err, session.ErrSeqConflict) {
		return fmt.Errorf("activities: store page %d of batch %s: %w", in.Page, in.BatchID, err)
	}
	if err := a.store.Sync(ctx, id); err != nil {
		return fmt.Errorf("activities: store page %d of batch %s: %w", in.Page, in.BatchID, err)
	}
	return nil
}

// LoadBatchPage returns the tasks of page in.Page of batch in.BatchID. A missing page is a
// non-retryable error.
func (a *Activities) LoadBatchPage(ctx context.Context, in workflows.BatchPageInput) ([]workflows.Task, error) {
	_, events, err := a.store.Load(ctx, pageID(in.BatchID, in.Page))
	if errors.Is(err, session.ErrNotFound) || (err == nil && len(events) == 0) {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("activities: page %d of batch %s is not in the session store", in.Page, in.BatchID), TypeBatchPage, err)
	}
	if err != nil {
		return nil, fmt.Errorf("activities: load page %d of batch %s: %w", in.Page, in.BatchID, err)
	}
	var tasks []workflows.Task
	if err := events[0].Decode(&tasks); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("activities: page %d of batch %s: %v", in.Page, in.BatchID, err), TypeBatchPage, nil)
	}
	return tasks, nil
}

// RemoveBatchPages removes pages 0 … in.Page-1 of batch in.BatchID.
func (a *Activities) RemoveBatchPages(ctx context.Context, in workflows.BatchPageInput) error {
	for n := range in.Page {
		if err := a.store.Remove(ctx, pageID(in.BatchID, n)); err != nil {
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
