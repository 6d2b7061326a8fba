package workflows

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

func TestCanceledOutcomePrefersTheActivityDetails(t *testing.T) {
	carried := Outcome{ChildID: "run-1", Depth: 3, Result: subagent.Result{
		Output: []session.Block{session.Text("partial")}, StopReason: subagent.StopAborted}}

	out, ok := CanceledOutcome(temporal.NewCanceledError(carried))
	assert.True(t, ok)
	assert.Equal(t, carried, out)
	_, ok = CanceledOutcome(temporal.NewCanceledError())
	assert.False(t, ok)
	_, ok = CanceledOutcome(errors.New("not canceled"))
	assert.False(t, ok)
}

// TestRunOutcome: the four ways a run ends, read the same by every caller.
func TestRunOutcome(t *testing.T) {
	done := Outcome{ChildID: "c", Result: subagent.Result{StopReason: subagent.StopCompleted}}
	out, err := RunOutcome(done, nil)
	require.NoError(t, err)
	assert.Equal(t, done, out)

	partial := Outcome{ChildID: "c", Result: subagent.Result{Output: []session.Block{session.Text("half")}, StopReason: subagent.StopAborted}}
	out, err = RunOutcome(Outcome{}, fmt.Errorf("child: %w", temporal.NewCanceledError(partial)))
	assert.True(t, temporal.IsCanceledError(err))
	assert.Equal(t, partial, out)

	out, err = RunOutcome(Outcome{}, temporal.NewCanceledError())
	assert.True(t, temporal.IsCanceledError(err))
	assert.Equal(t, Outcome{Result: subagent.Result{StopReason: subagent.StopAborted}}, out)

	out, err = RunOutcome(Outcome{}, temporal.NewCanceledError(Outcome{ChildID: "c"}))
	assert.True(t, temporal.IsCanceledError(err))
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason, "no stop reason in the details reads as aborted")

	rejected := ToApplicationError(subagent.Rejectf(subagent.RuleInvalidMaxDepth, "subagent maxDepth must be a non-negative safe integer"))
	out, err = RunOutcome(done, fmt.Errorf("child: %w", rejected))
	var ve *subagent.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, subagent.RuleInvalidMaxDepth, ve.Rule)
	assert.EqualError(t, err, "subagent maxDepth must be a non-negative safe integer")
	assert.Equal(t, Outcome{}, out)

	other := errors.New("boom")
	out, err = RunOutcome(done, other)
	assert.Same(t, other, err)
	assert.Equal(t, Outcome{}, out)
}

func TestBatchOutcome(t *testing.T) {
	sum := BatchSummary{BatchID: "b", Total: 3}
	got, err := BatchOutcome(BatchSummary{}, temporal.NewCanceledError(sum))
	require.NoError(t, err)
	assert.Equal(t, sum.Total, got.Total)
	got, err = BatchOutcome(sum, nil)
	require.NoError(t, err)
	assert.Equal(t, sum, got)
}
