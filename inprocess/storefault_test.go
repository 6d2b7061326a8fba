package inprocess

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// errStoreDown is the failure faultyStore injects: the store briefly unreachable.
var errStoreDown = errors.New("store unreachable")

// faultyStore is a real store whose first append of one event type fails (after skip
// appends of that type went through), as when the store's server restarts mid-turn; every
// other call reaches the real store. With committed the failing append is stored all the
// same: the server went down after committing it, before its reply.
type faultyStore struct {
	session.Store
	failType  string
	skip      int
	committed bool

	mu     sync.Mutex
	failed bool
}

func (s *faultyStore) Append(ctx context.Context, id string, events ...session.Event) error {
	s.mu.Lock()
	fail := !s.failed && len(events) > 0 && events[0].Type == s.failType
	if fail && s.skip > 0 {
		s.skip--
		fail = false
	}
	s.failed = s.failed || fail
	s.mu.Unlock()
	if fail && !s.committed {
		return errStoreDown
	}
	if err := s.Store.Append(ctx, id, events...); err != nil || !fail {
		return err
	}
	return errStoreDown
}

// TestDriveLeavesTheTurnPendingWhenASessionWriteFails: a session append of the turn that the
// store fails is an infrastructure fault, not the child's: the drive writes no turn/end and
// fails with the store's error naming the session and the operation, and the next drive (a
// retried activity, on another host or on the same one, whose scripted model already answered
// the torn step) resumes the turn to the expected answer without doubling what was stored.
func TestDriveLeavesTheTurnPendingWhenASessionWriteFails(t *testing.T) {
	cases := []struct {
		failType  string
		committed bool  // the failed append was stored all the same
		counted   int64 // executions of the count tool: a result that was not stored runs again
	}{
		{session.TypeAssistantMessage, false, 1},
		{session.TypeAssistantMessage, true, 1},
		{session.TypeToolResult, false, 2},
		{session.TypeStepEnd, false, 1},
		{session.TypeAssistantChunk, false, 1},
	}
	for _, tc := range cases {
		for _, sameHost := range []bool{false, true} {
			name := tc.failType
			if tc.committed {
				name += " stored"
			}
			if sameHost {
				name += "/same host"
			} else {
				name += "/other host"
			}
			t.Run(name, func(t *testing.T) {
				f := newFixture(t)
				f.script(t, "child.json", `{"toolCalls": [{"name": "count", "input": {}}]}`, `{"text": "done"}`)
				parent := f.parent(t, session.Header{Route: route("child.json")})
				req := request(parent, "count once")
				created, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
				require.NoError(t, err)
				dr := DriveRequest{ChildID: created.ChildID, Request: req}

				dr.Store = &faultyStore{Store: f.store, failType: tc.failType, committed: tc.committed}
				_, err = f.host.Drive(context.Background(), dr)
				var se *agent.StoreError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, created.ChildID, se.SessionID)
				assert.Equal(t, "append "+tc.failType, se.Op)
				assert.ErrorIs(t, err, errStoreDown)
				var ie *InterruptedError
				assert.False(t, errors.As(err, &ie), "not a model interruption")
				assert.NotContains(t, types(f.events(t, created.ChildID)), session.TypeTurnEnd,
					"the turn stays unfinished for the retry")

				dr.Store = nil
				retry := f.host
				if !sameHost {
					retry = f.freshHost(t)
				}
				_, err = retry.Drive(context.Background(), dr)
				require.NoError(t, err)
				res, err := f.host.ReadResult(context.Background(), ReadRequest{ChildID: created.ChildID, Request: req})
				require.NoError(t, err)
				assert.Equal(t, subagent.StopCompleted, res.StopReason, "turn/end: %+v", lastTurnEnd(t, f.events(t, created.ChildID)))
				assert.Equal(t, "done", session.JoinText(res.Output))

				events := f.events(t, created.ChildID)
				count := map[string]int{}
				for _, ev := range events {
					count[ev.Type]++
				}
				assert.Equal(t, 1, count[session.TypeInboxSpliced], "the prompt is spliced once")
				assert.Equal(t, 1, count[session.TypeTurnStart])
				assert.Equal(t, 1, count[session.TypeTurnEnd])
				assert.Equal(t, 2, count[session.TypeAssistantMessage], "the tool call, then the answer")
				assert.Equal(t, 1, count[session.TypeToolResult])
				assert.Equal(t, 1, count[session.TypeSubagentDescr])
				assert.Equal(t, tc.counted, f.counted.Load())
			})
		}
	}
}

// TestDriveRetriedOnTheSameHostAfterAFailedAnswerAppend: when a chunk append or the
// assistant message append fails (PostgreSQL restarting mid-stream), the retried drive often
// lands on the same worker, whose scripted model already saw the session: the torn step left
// no assistant message, so its redo must take the same response and the turn complete with
// the whole answer (docs/durability.md), not `script exhausted` into stop reason error with
// the stored fragment. Whichever chunk fails, the first or the last of the stream, or the
// message after the whole stream was stored.
func TestDriveRetriedOnTheSameHostAfterAFailedAnswerAppend(t *testing.T) {
	cases := []struct {
		name     string
		failType string
		skip     int
	}{
		{"chunk 1 of 4", session.TypeAssistantChunk, 0},
		{"chunk 2 of 4", session.TypeAssistantChunk, 1},
		{"chunk 4 of 4", session.TypeAssistantChunk, 3},
		{"message", session.TypeAssistantMessage, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.script(t, "child.json", `{"text": "fine", "chunks": 4}`)
			parent := f.parent(t, session.Header{Route: route("child.json")})
			req := request(parent, "answer")
			created, err := f.host.Create(context.Background(), CreateRequest{Provider: subagent.ProviderSpawn, Request: req})
			require.NoError(t, err)
			dr := DriveRequest{ChildID: created.ChildID, Request: req}

			dr.Store = &faultyStore{Store: f.store, failType: tc.failType, skip: tc.skip}
			_, err = f.host.Drive(context.Background(), dr)
			require.ErrorIs(t, err, errStoreDown)

			dr.Store = nil
			_, err = f.host.Drive(context.Background(), dr)
			require.NoError(t, err)
			res, err := f.host.ReadResult(context.Background(), ReadRequest{ChildID: created.ChildID, Request: req})
			require.NoError(t, err)
			assert.Equal(t, subagent.StopCompleted, res.StopReason, "turn/end: %+v", lastTurnEnd(t, f.events(t, created.ChildID)))
			assert.Equal(t, "fine", session.JoinText(res.Output))
		})
	}
}

// TestLibraryRunEndsErrorWhenASessionWriteFails: a library run has no driver to retry it, so
// a session write the store fails ends its turn `error` (once the store takes the turn/end)
// rather than leaving it pending for ever.
func TestLibraryRunEndsErrorWhenASessionWriteFails(t *testing.T) {
	f := newFixture(t)
	f.script(t, "child.json", `{"toolCalls": [{"name": "count", "input": {}}]}`, `{"text": "done"}`)
	host, err := NewHost(Options{
		Store: &faultyStore{Store: f.store, failType: session.TypeStepEnd}, Models: f.models, Tools: f.tools, Presets: f.presets,
	})
	require.NoError(t, err)
	parent := f.parent(t, session.Header{Route: route("child.json")})
	r, err := host.Start(context.Background(), request(parent, "count once"), StartOptions{})
	require.NoError(t, err)
	res := result(t, r)
	require.NoError(t, r.Dispose(context.Background()))
	assert.Equal(t, subagent.StopError, res.StopReason)
	reason := lastTurnEnd(t, f.events(t, r.ID()))
	assert.Equal(t, session.EndError, reason.Kind)
	assert.Contains(t, reason.Message, "append step/end to session "+r.ID())
	assert.Contains(t, reason.Message, errStoreDown.Error())
}
