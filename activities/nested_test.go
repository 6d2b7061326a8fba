package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow/activities"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
	subagenttool "github.com/subflow-dev/subflow/subagent/tool"
	"github.com/subflow-dev/subflow/workflows"
)

// The nested runs of a real server are covered by test/nested_test.go. These tests stand a
// fake Temporal client in for the server, to see what RecordNested reads of a nested run.

const delegateOnce = `{"toolCalls": [{"name": "subagent", "input": {"task": "nested task", "label": "n"}}]}`

func TestNewRejectsASubagentToolItCannotHonour(t *testing.T) {
	f := newFixture(t)
	reg := &tools.Registry{}
	cfg := activities.Config{Store: f.store, Models: model.NewDefaultRegistry(), Tools: reg, SubagentProvider: subagent.ProviderSDK}
	_, err := activities.New(cfg)
	require.ErrorContains(t, err, `subagent provider "sdk" does not support the "depthLimit" capability: set maxDepth to "provider-managed"`)

	cfg.SubagentMaxDepth = subagent.ProviderManagedDepth()
	_, err = activities.New(cfg)
	require.NoError(t, err)

	cfg.SubagentProvider = "nope"
	_, err = activities.New(cfg)
	require.ErrorContains(t, err, `no subagent provider registered for "nope"`)
}

func TestSubagentToolWithMaxDepthZeroDelegatesNothing(t *testing.T) {
	f := newFixture(t, delegateOnce, `{"text": "done"}`)
	zero, err := subagent.MaxDepthLimit(0)
	require.NoError(t, err)
	e := newEnv(t, f.activities(func(c *activities.Config) { c.SubagentMaxDepth = zero }), worker.Options{})
	req := request("delegate")
	publish(t, e, "child-1", req)
	sum, err := drive(e, "child-1", req)
	require.NoError(t, err)

	assert.Equal(t, []string{"Error: subagent delegation is disabled here (maxDepth 0)"}, subagentResults(t, f, "child-1"))
	assert.Empty(t, sum.Delegations)
}

func TestSubagentToolFilteredOutByTheRequest(t *testing.T) {
	f := newFixture(t, delegateOnce, `{"text": "done"}`)
	e := newEnv(t, f.activities(), worker.Options{})
	req := request("delegate")
	req.ToolFilter = &subagent.ToolFilter{Deny: []string{subagenttool.Name}}
	publish(t, e, "child-1", req)
	sum, err := drive(e, "child-1", req)
	require.NoError(t, err)

	results := subagentResults(t, f, "child-1")
	require.Len(t, results, 1)
	assert.Contains(t, results[0], `Error: unknown tool "subagent"`)
	assert.Empty(t, sum.Delegations)
}

func withClient(a *activities.Activities, c client.Client) *activities.Activities {
	activities.SetClient(a, c)
	return a
}

// subagentResults returns the texts of the subagent tool results in a session's log.
func subagentResults(t *testing.T, f *fixture, id string) []string {
	t.Helper()
	var out []string
	for _, ev := range f.events(id) {
		var d session.ToolResultData
		if ev.Type == session.TypeToolResult && ev.Decode(&d) == nil && d.Name == subagenttool.Name {
			out = append(out, session.JoinText(d.Content))
		}
	}
	return out
}

// fakeClient is the Temporal client RecordNested reads nested runs through: every run
// completes with "nested answer", or, once cancelled is set, ends Canceled with the partial
// output "half".
type fakeClient struct {
	client.Client // nil: only the methods below are called
	cancelled     bool
}

type fakeRun struct {
	client.WorkflowRun // nil: only the methods below are called
	client             *fakeClient
	id                 string
}

func (r *fakeRun) GetID() string    { return r.id }
func (r *fakeRun) GetRunID() string { return "run-1" }

func (r *fakeRun) Get(_ context.Context, valuePtr any) error {
	if r.client.cancelled {
		return temporal.NewCanceledError(workflows.Outcome{ChildID: "nested", Depth: 2, Result: subagent.Result{
			Output: []session.Block{session.Text("half")}, StopReason: subagent.StopAborted,
		}})
	}
	*valuePtr.(*workflows.Outcome) = workflows.Outcome{ChildID: "nested", Depth: 2, Result: subagent.Result{
		Output: []session.Block{session.Text("nested answer")}, StopReason: subagent.StopCompleted,
	}}
	return nil
}

// GetWorkflow returns the nested run of id, as RecordNested reads it.
func (c *fakeClient) GetWorkflow(_ context.Context, id, _ string) client.WorkflowRun {
	return &fakeRun{client: c, id: id}
}

// TestDriveDefersSubagentCallsAndRecordNestedAnswersThem: the drive returns the subagent call as a delegation (deterministic child id, the calling session as
// parent), leaves it unanswered and the turn pending, and starts nothing itself.
// RecordNested stores the nested run's result as the call's tool result, once however often
// it runs, and the next drive finishes the turn without running the call again.
func TestDriveDefersSubagentCallsAndRecordNestedAnswersThem(t *testing.T) {
	f := newFixture(t, delegateOnce, `{"text": "parent done"}`)
	e := newEnv(t, withClient(f.activities(), &fakeClient{}), worker.Options{})
	req := request("delegate")
	publish(t, e, "child-1", req)

	sum, err := drive(e, "child-1", req)
	require.NoError(t, err)
	require.Len(t, sum.Delegations, 1)
	d := sum.Delegations[0]
	assert.Equal(t, "call_0_0", d.CallID)
	assert.Equal(t, activities.NestedChildID("child-1", "call_0_0"), d.ChildID)
	assert.Equal(t, subagent.ProviderSpawn, d.Provider)
	assert.Equal(t, "child-1", d.Request.Parent.SessionID)
	assert.Empty(t, subagentResults(t, f, "child-1"))
	assert.False(t, f.hasEvent("child-1", session.TypeTurnEnd), "the turn stays pending")

	record := workflows.RecordNestedInput{ChildID: "child-1", Calls: []workflows.NestedCall{
		{CallID: d.CallID, WorkflowID: workflows.WorkflowID(d.ChildID)},
	}}
	for range 2 {
		_, err := e.ExecuteActivity(workflows.ActivityRecordNested, record)
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"nested answer"}, subagentResults(t, f, "child-1"))

	sum, err = drive(e, "child-1", req)
	require.NoError(t, err)
	assert.Empty(t, sum.Delegations, "a stored result is not delegated again")
	assert.Equal(t, []string{"nested answer"}, subagentResults(t, f, "child-1"))
	out := readResult(t, e, "child-1", req, false)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "parent done", session.JoinText(out.Result.Output))
}

// TestRecordNestedOfACancelledRunRecordsItsPartialOutput: a nested run that ended Canceled
// (the calling run was cancelled) answers its call with the aborted outcome its details carry,
// partial output included (docs/nested.md).
func TestRecordNestedOfACancelledRunRecordsItsPartialOutput(t *testing.T) {
	f := newFixture(t, delegateOnce, `{"text": "never reached"}`)
	e := newEnv(t, withClient(f.activities(), &fakeClient{cancelled: true}), worker.Options{})
	req := request("delegate")
	publish(t, e, "child-1", req)
	sum, err := drive(e, "child-1", req)
	require.NoError(t, err)
	require.Len(t, sum.Delegations, 1)

	d := sum.Delegations[0]
	_, err = e.ExecuteActivity(workflows.ActivityRecordNested, workflows.RecordNestedInput{ChildID: "child-1",
		Calls: []workflows.NestedCall{{CallID: d.CallID, WorkflowID: workflows.WorkflowID(d.ChildID)}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"subagent run was cancelled\nPartial output before the run ended:\nhalf"},
		subagentResults(t, f, "child-1"), "the nested run's aborted outcome is the tool result")
}

func TestNewRejectsAModelRequestsPerMinuteBelowOne(t *testing.T) {
	f := newFixture(t)
	cfg := activities.Config{Store: f.store, Models: model.NewDefaultRegistry(), Tools: &tools.Registry{},
		ModelRequestsPerMinute: map[string]int{"deepseek-official": 0}}
	_, err := activities.New(cfg)
	require.ErrorContains(t, err, "model requests per minute of deepseek-official must be at least 1: 0")

	cfg.ModelRequestsPerMinute["deepseek-official"] = 60
	_, err = activities.New(cfg)
	require.NoError(t, err)
}
