package filestore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

// turnLog builds a log from event types, numbered from 0.
func turnLog(t *testing.T, types ...string) []session.Event {
	t.Helper()
	out := make([]session.Event, len(types))
	for i, typ := range types {
		e, err := session.NewEvent(typ, struct{}{})
		require.NoError(t, err)
		e.Seq = int64(i)
		out[i] = e
	}
	return out
}

func TestForkPrefix(t *testing.T) {
	const (
		start = session.TypeTurnStart
		step  = session.TypeStepStart
		msg   = session.TypeAssistantMessage
		end   = session.TypeTurnEnd
	)
	t.Run("no completed turn", func(t *testing.T) {
		assert.Nil(t, session.ForkPrefix(nil))
		assert.Nil(t, session.ForkPrefix(turnLog(t, session.TypeApprovalPolicy)))
		assert.Nil(t, session.ForkPrefix(turnLog(t, start, step, msg)), "a first turn in flight")
	})
	t.Run("completed turns", func(t *testing.T) {
		log := turnLog(t, start, msg, end, start, msg, end)
		assert.Equal(t, log, session.ForkPrefix(log))
	})
	t.Run("in-flight turn excluded", func(t *testing.T) {
		log := turnLog(t, start, msg, end, start, msg, end, start, step, msg)
		prefix := session.ForkPrefix(log)
		assert.Equal(t, log[:6], prefix)

		prefix[0].Seq = 99
		assert.Equal(t, int64(0), log[0].Seq, "the parent's log is not modified")
	})
}

func TestSeedEvents(t *testing.T) {
	parent := turnLog(t, session.TypeTurnStart, session.TypeAssistantMessage, session.TypeTurnEnd, session.TypeTurnStart)
	seed := session.ForkPrefix(parent)

	s := newStore(t, t.TempDir())
	h := header("child")
	h.SeedLength = int64(len(seed))
	require.NoError(t, s.Create(ctx, h))
	require.NoError(t, s.Append(ctx, "child", session.SeedEvents(seed)...))
	require.NoError(t, s.Append(ctx, "child", events(t, len(seed)+1, 1)...), "the child's own events follow")

	got, evs, err := s.Load(ctx, "child")
	require.NoError(t, err)
	require.Len(t, evs, 5)
	assert.Equal(t, seed, evs[:3])
	assert.Equal(t, session.TypeEndSeed, evs[got.SeedLength].Type, "end-seed sits at seq = seedLength")
	assert.Equal(t, session.TypeAssistantChunk, evs[4].Type)

	unseeded := session.SeedEvents(nil)
	require.Len(t, unseeded, 1)
	assert.Equal(t, session.TypeEndSeed, unseeded[0].Type)
	assert.Equal(t, int64(0), unseeded[0].Seq)
}

func TestRenumber(t *testing.T) {
	log := turnLog(t, session.TypeTurnStart, session.TypeTurnEnd)
	got := session.Renumber(log, 7)
	assert.Equal(t, []int64{7, 8}, []int64{got[0].Seq, got[1].Seq})
	assert.Equal(t, int64(0), log[0].Seq, "the input is not modified")
}
