package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// nestedDelegations are two subagent calls of child-1, as its first Drive defers them.
func nestedDelegations() []Delegation {
	d := func(call, child string) Delegation {
		return Delegation{CallID: call, ChildID: child, Provider: subagent.ProviderSpawn, Request: subagent.Request{
			Prompt: []session.Block{session.Text("part " + call)},
			Parent: subagent.ParentRef{SessionID: "child-1", Cwd: "/work"},
		}}
	}
	return []Delegation{d("call-a", "nested-a"), d("call-b", "nested-b")}
}

// TestDriveYieldsDelegationsToChildWorkflows: a Drive that returns delegations has each run
// as a StartSubagent child workflow (publish, drive, read of its own), their results
// recorded by RecordNested, and the turn driven on by a second Drive before the result is
// read.
func TestDriveYieldsDelegationsToChildWorkflows(t *testing.T) {
	h := newHarness(t)
	h.sendUpdate()
	first := true
	h.fakes.onDrive = func(_ context.Context, in ChildInput) (DriveSummary, error) {
		if in.ChildID == "child-1" && first {
			first = false
			return DriveSummary{Steps: 1, Delegations: nestedDelegations()}, nil
		}
		return DriveSummary{Steps: 2}, nil
	}
	h.run(t, spawnInput())
	require.NoError(t, h.env.GetWorkflowError())
	var out Outcome
	require.NoError(t, h.env.GetWorkflowResult(&out))
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)

	var drives, published []string
	for _, d := range h.fakes.drives {
		drives = append(drives, d.ChildID)
	}
	for _, p := range h.fakes.publish {
		published = append(published, p.ChildID)
	}
	assert.ElementsMatch(t, []string{"child-1", "nested-a", "nested-b"}, published)
	assert.ElementsMatch(t, []string{"child-1", "nested-a", "nested-b", "child-1"}, drives)
	assert.Equal(t, "child-1", drives[len(drives)-1], "the parent drives on after its children")
	assert.Equal(t, []RecordNestedInput{{ChildID: "child-1", Calls: []NestedCall{
		{CallID: "call-a", WorkflowID: "subagent-nested-a"},
		{CallID: "call-b", WorkflowID: "subagent-nested-b"},
	}}}, h.fakes.nested)
	calls := h.fakes.Calls()
	assert.Equal(t, ActivityReadResult, calls[len(calls)-1])
}

// TestCancelWhileDelegatingRecordsPartialAnswers: a run cancelled while its children run
// cancels them, waits for them to close, records their (aborted) results and ends Canceled
// with its own aborted outcome.
func TestCancelWhileDelegatingRecordsPartialAnswers(t *testing.T) {
	h := newHarness(t)
	h.sendUpdate()
	block := blockUntilCancelled(t)
	started := make(chan struct{}, 2)
	h.fakes.onDrive = func(ctx context.Context, in ChildInput) (DriveSummary, error) {
		if in.ChildID == "child-1" {
			return DriveSummary{Steps: 1, Delegations: nestedDelegations()}, nil
		}
		started <- struct{}{}
		block(ctx)
		return DriveSummary{}, ctx.Err()
	}
	both := make(chan struct{})
	go func() {
		<-started
		<-started
		close(both)
	}()
	h.whenClosed(both, func() { h.env.CancelWorkflow() })
	h.run(t, spawnInput())

	var canceled *temporal.CanceledError
	require.ErrorAs(t, h.env.GetWorkflowError(), &canceled)
	var out Outcome
	require.NoError(t, canceled.Details(&out))
	assert.Equal(t, subagent.StopAborted, out.Result.StopReason)
	require.Len(t, h.fakes.nested, 1, "the children's results are recorded after the cancel")
	cancelledReads := 0
	for _, r := range h.fakes.reads {
		if r.Cancelled {
			cancelledReads++
		}
	}
	assert.Equal(t, 3, cancelledReads, "the run and both children read their aborted results")
}
