package inprocess

import (
	"context"
	"errors"
	"fmt"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// ReadRequest asks ReadResult for a child's result.
type ReadRequest struct {
	ChildID string
	// Request is the delegation; an output schema makes the result structured (contract R-43).
	Request subagent.Request
	// Cancelled says the run was cancelled: an unfinished result settles as aborted, and a
	// turn the log leaves unended (its drive died) is recorded as ended aborted, cause parent.
	Cancelled bool
}

// ReadResult reads a child's result from the stored log (contract R-28), so any worker can read
// what another one drove: the output of the child's own events (contract R-6), the stop reason
// of the last turn/end, and for a structured request the committed value — without one the
// run is an error. A cancelled run that did not complete is aborted.
func (h *Host) ReadResult(ctx context.Context, rr ReadRequest) (subagent.Result, error) {
	res, _, _, err := h.ReadResultLog(ctx, rr)
	return res, err
}

// ReadResultLog is ReadResult with the session the result was read from: its header and its
// whole log (the parent's seed first, then the child's own events, with the turn end a
// cancelled run's read appended), so that a caller reporting more of the run than its result
// (its usage, its digest) need not load the session again.
func (h *Host) ReadResultLog(ctx context.Context, rr ReadRequest) (subagent.Result, session.Header, []session.Event, error) {
	hd, events, err := h.store.Load(ctx, rr.ChildID)
	if err != nil {
		return subagent.Result{}, hd, nil, fmt.Errorf("inprocess: read result of %s: %w", rr.ChildID, err)
	}
	if rr.Cancelled {
		if _, live := h.Agent(rr.ChildID); !live {
			if events, err = h.endUnfinished(ctx, hd.ID, events); err != nil {
				return subagent.Result{}, hd, nil, err
			}
		}
	}
	res, err := readResult(rr.ChildID, ownEvents(hd, events), rr.Request.HasOutputSchema(), rr.Cancelled)
	return res, hd, events, err
}

// endUnfinished appends turn/end aborted (cause parent) when the log ends inside a started
// turn, and returns the log as it then stands. Losing the race to another writer is fine:
// that writer is the drive ending the turn itself.
func (h *Host) endUnfinished(ctx context.Context, id string, events []session.Event) ([]session.Event, error) {
	turn := -1
	for i := len(events) - 1; i >= 0 && turn < 0; i-- {
		switch events[i].Type {
		case session.TypeTurnEnd:
			return events, nil
		case session.TypeTurnStart:
			var d session.TurnStartData
			if err := events[i].Decode(&d); err != nil {
				return nil, fmt.Errorf("inprocess: read result of %s: %w", id, err)
			}
			turn = d.Turn
		}
	}
	if turn < 0 {
		return events, nil
	}
	ev, err := session.NewEvent(session.TypeTurnEnd, session.TurnEndData{
		Turn: turn, Reason: session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent},
	})
	if err != nil {
		return nil, fmt.Errorf("inprocess: read result of %s: %w", id, err)
	}
	ev.Seq = int64(len(events))
	err = h.store.Append(ctx, id, ev)
	switch {
	case errors.Is(err, session.ErrSeqConflict):
	case err != nil:
		return nil, fmt.Errorf("inprocess: read result of %s: %w", id, err)
	default:
		if err := h.store.Sync(ctx, id); err != nil {
			return nil, fmt.Errorf("inprocess: read result of %s: %w", id, err)
		}
	}
	_, events, err = h.store.Load(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("inprocess: read result of %s: %w", id, err)
	}
	return events, nil
}

// readResult computes a result from the child's own events.
func readResult(id string, own []session.Event, structured, cancelled bool) (subagent.Result, error) {
	var c subagent.Collector
	for _, ev := range own {
		if err := c.Add(ev); err != nil {
			return subagent.Result{}, fmt.Errorf("inprocess: read result of %s: %w", id, err)
		}
	}
	res := subagent.Result{Output: c.Output(), StopReason: subagent.InProcessStopReason(c.LastTurnEnd())}
	if structured {
		value, err := committedValue(own)
		if err != nil {
			return subagent.Result{}, fmt.Errorf("inprocess: read result of %s: %w", id, err)
		}
		if value != nil {
			res.Structured = value
		} else {
			// No re-prompt: a turn that ended without a committed value failed (contract R-43).
			res.StopReason = subagent.StopError
		}
	}
	if cancelled && res.StopReason != subagent.StopCompleted {
		res.StopReason = subagent.StopAborted
	}
	return res, nil
}
