package agent

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
)

// gateTool blocks its first call until its context ends (a tool in flight when the worker
// stops); later calls return at once.
func gateTool(entered chan<- struct{}) tools.Tool {
	var calls atomic.Int32
	return tools.Tool{
		Name:        "gate",
		Description: "Wait at the gate.",
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, _ tools.Env, _ tools.Call) (tools.Result, error) {
			if calls.Add(1) > 1 {
				return tools.TextResult("passed"), nil
			}
			close(entered)
			<-ctx.Done()
			return tools.Result{}, ctx.Err()
		},
	}
}

func TestSuspendLeavesTheTurnPendingAndResumeFinishesIt(t *testing.T) {
	f := newFixture(t)
	entered := make(chan struct{})
	require.NoError(t, f.tools.Register(counterTool()))
	require.NoError(t, f.tools.Register(gateTool(entered)))
	f.create("s", f.script(
		`{"toolCalls": [{"name": "count"}, {"name": "gate"}]}`,
		`{"text": "done"}`,
	))
	a := f.open("s", func(o *Options) { o.Preset = Preset{} })
	_, err := a.Followup(context.Background(), []session.Block{session.Text("count, then wait")})
	require.NoError(t, err)
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the gate tool never ran")
	}
	require.NoError(t, a.Suspend(context.Background()))
	require.NoError(t, a.Suspend(context.Background()), "idempotent")
	require.NoError(t, a.Close(context.Background()), "a suspended agent is closed")
	_, err = a.Followup(context.Background(), []session.Block{session.Text("more")})
	assert.ErrorIs(t, err, ErrClosed)

	events := f.events("s")
	assert.Equal(t, session.TypeToolResult, events[len(events)-1].Type,
		"the count result is stored; the interrupted gate call and the turn end are not")
	assert.Equal(t, -1, indexOf(events, session.TypeTurnEnd, 0))
	assert.True(t, a.Pending())
	require.Equal(t, 1, counter(t, f.cwd))

	f.freshModel() // the next worker
	b := f.open("s", func(o *Options) { o.Preset = Preset{} })
	require.True(t, b.Pending())
	require.NoError(t, b.Resume(context.Background()))
	waitIdle(t, b)
	assert.Equal(t, 1, counter(t, f.cwd), "the stored tool call is not run again")
	events = f.events("s")
	assert.Equal(t, session.TurnEndData{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}}, lastTurnEnd(t, events))
	assert.Equal(t, 1, countType(events, session.TypeTurnEnd))
	require.NoError(t, b.Close(context.Background()))
}

func TestSuspendIdleAgentWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.create("idle", f.script(`{"text": "hi"}`))
	a := f.open("idle")
	ask(t, a, "hello")
	before := f.events("idle")
	require.NoError(t, a.Suspend(context.Background()))
	assert.Equal(t, before, f.events("idle"))
	assert.False(t, a.Pending())
	_, err := a.Append(context.Background(), session.TypeApprovalPolicy, session.ApprovalPolicyData{Policy: tools.ApprovalNever})
	assert.ErrorIs(t, err, ErrSuspended)
}

func countType(events []session.Event, typ string) int {
	n := 0
	for _, e := range events {
		if e.Type == typ {
			n++
		}
	}
	return n
}
