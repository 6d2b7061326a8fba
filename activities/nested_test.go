package activities_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
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
// fake Temporal client in for the server, to see what the subagent tool asks of it when the
// drive that called it is cancelled or suspended.

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
	fc := newFakeClient()
	e := newEnv(t, withClient(f.activities(func(c *activities.Config) { c.SubagentMaxDepth = zero }), fc),
		worker.Options{})
	req := request("delegate")
	publish(t, e, "child-1", req)
	_, err = drive(e, "child-1", req)
	require.NoError(t, err)

	assert.Equal(t, []string{"Error: subagent delegation is disabled here (maxDepth 0)"}, subagentResults(t, f, "child-1"))
	assert.Empty(t, fc.startedOptions())
}

func TestSubagentToolFilteredOutByTheRequest(t *testing.T) {
	f := newFixture(t, delegateOnce, `{"text": "done"}`)
	fc := newFakeClient()
	e := newEnv(t, withClient(f.activities(), fc), worker.Options{})
	req := request("delegate")
	req.ToolFilter = &subagent.ToolFilter{Deny: []string{subagenttool.Name}}
	publish(t, e, "child-1", req)
	_, err := drive(e, "child-1", req)
	require.NoError(t, err)

	results := subagentResults(t, f, "child-1")
	require.Len(t, results, 1)
	assert.Contains(t, results[0], `Error: unknown tool "subagent"`)
	assert.Empty(t, fc.startedOptions())
}

func TestSubagentToolCancelledDriveCancelsTheNestedRun(t *testing.T) {
	f := newFixture(t, delegateOnce, `{"text": "never reached"}`)
	fc := newFakeClient()
	bg, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e := newEnv(t, withClient(f.activities(), fc), worker.Options{
		BackgroundActivityContext: bg,
	})
	req := request("delegate")
	publish(t, e, "child-1", req)

	errc := make(chan error, 1)
	go func() {
		_, err := drive(e, "child-1", req)
		errc <- err
	}()
	receive(t, "the nested start", fc.started)
	cancel(temporal.NewCanceledError())
	err := receive(t, "the drive", errc)
	assert.True(t, temporal.IsCanceledError(err), "got %T: %v", err, err)

	nestedID := workflows.WorkflowID(activities.NestedChildID("child-1", "call_0_0"))
	assert.Equal(t, []string{nestedID}, fc.cancelledIDs())
	assert.Equal(t, []string{"subagent run was cancelled\nPartial output before the run ended:\nhalf"},
		subagentResults(t, f, "child-1"), "the nested run's aborted outcome is the tool result")
}

func TestSubagentToolSuspendedDriveLeavesTheNestedRunAndTheRetryAttaches(t *testing.T) {
	f := newFixture(t, delegateOnce, `{"text": "parent done"}`)
	fc := newFakeClient()
	stop := make(chan struct{})
	first := newEnv(t, withClient(f.activities(), fc), worker.Options{})
	first.SetWorkerStopChannel(stop)
	req := request("delegate")
	publish(t, first, "child-1", req)

	errc := make(chan error, 1)
	go func() {
		_, err := drive(first, "child-1", req)
		errc <- err
	}()
	receive(t, "the nested start", fc.started)
	close(stop)
	appErr := requireApplicationError(t, receive(t, "the drive", errc))
	assert.Equal(t, activities.TypeWorkerStopping, appErr.Type())
	assert.Empty(t, fc.cancelledIDs(), "a suspended caller leaves its nested run running")
	assert.Empty(t, subagentResults(t, f, "child-1"), "the interrupted call has no result")

	// The retry runs the stored call again: it starts the same workflow id, which the
	// conflict and reuse policies turn into attaching to the run already there.
	close(fc.complete)
	second := newEnv(t, withClient(f.activities(), fc), worker.Options{})
	_, err := drive(second, "child-1", req)
	require.NoError(t, err)
	assert.Equal(t, []string{"nested answer"}, subagentResults(t, f, "child-1"))

	opts := fc.startedOptions()
	require.Len(t, opts, 2)
	nestedID := workflows.WorkflowID(activities.NestedChildID("child-1", "call_0_0"))
	for _, o := range opts {
		assert.Equal(t, nestedID, o.ID)
		assert.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, o.WorkflowIDConflictPolicy)
		assert.Equal(t, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, o.WorkflowIDReusePolicy)
		parent, ok := o.TypedSearchAttributes.GetKeyword(workflows.AttrParent)
		assert.True(t, ok)
		assert.Equal(t, "child-1", parent, "the nested run's SubagentParent is the calling session")
		assert.Contains(t, o.StaticDetails, "**delegated by**: [")
	}
	assert.Empty(t, fc.cancelledIDs())
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

// fakeClient is the Temporal client the activities start nested runs through: its one
// nested run waits until it is cancelled (then it ends Canceled with partial output "half")
// or until complete is closed (then it completes with "nested answer").
type fakeClient struct {
	client.Client // nil: only the methods below are called

	started  chan struct{} // receives once per ExecuteWorkflow
	complete chan struct{}

	mu        sync.Mutex
	opts      []client.StartWorkflowOptions
	cancelled []string
	cancelCh  chan struct{}
}

func newFakeClient() *fakeClient {
	return &fakeClient{started: make(chan struct{}, 10), complete: make(chan struct{}), cancelCh: make(chan struct{})}
}

func (c *fakeClient) ExecuteWorkflow(_ context.Context, opts client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	c.mu.Lock()
	c.opts = append(c.opts, opts)
	c.mu.Unlock()
	c.started <- struct{}{}
	return &fakeRun{client: c, id: opts.ID}, nil
}

func (c *fakeClient) CancelWorkflow(_ context.Context, id, _ string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = append(c.cancelled, id)
	if len(c.cancelled) == 1 {
		close(c.cancelCh)
	}
	return nil
}

func (c *fakeClient) startedOptions() []client.StartWorkflowOptions {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]client.StartWorkflowOptions(nil), c.opts...)
}

func (c *fakeClient) cancelledIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.cancelled...)
}

type fakeRun struct {
	client.WorkflowRun // nil: only the methods below are called
	client             *fakeClient
	id                 string
}

func (r *fakeRun) GetID() string    { return r.id }
func (r *fakeRun) GetRunID() string { return "run-1" }

func (r *fakeRun) Get(ctx context.Context, valuePtr any) error {
	select {
	case <-r.client.cancelCh:
		return temporal.NewCanceledError(workflows.Outcome{ChildID: "nested", Depth: 2, Result: subagent.Result{
			Output: []session.Block{session.Text("half")}, StopReason: subagent.StopAborted,
		}})
	case <-r.client.complete:
		*valuePtr.(*workflows.Outcome) = workflows.Outcome{ChildID: "nested", Depth: 2, Result: subagent.Result{
			Output: []session.Block{session.Text("nested answer")}, StopReason: subagent.StopCompleted,
		}}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// GetWorkflow returns the nested run of id, as RecordNested reads it.
func (c *fakeClient) GetWorkflow(_ context.Context, id, _ string) client.WorkflowRun {
	return &fakeRun{client: c, id: id}
}

// TestYieldingDriveDefersSubagentCallsAndRecordNestedAnswersThem: with Yield the drive
// returns the subagent call as a delegation (deterministic child id, the calling session as
// parent), leaves it unanswered and the turn pending, and starts nothing itself.
// RecordNested stores the nested run's result as the call's tool result, once however often
// it runs, and the next drive finishes the turn without running the call again.
func TestYieldingDriveDefersSubagentCallsAndRecordNestedAnswersThem(t *testing.T) {
	f := newFixture(t, delegateOnce, `{"text": "parent done"}`)
	fc := newFakeClient()
	close(fc.complete)
	e := newEnv(t, withClient(f.activities(), fc), worker.Options{})
	req := request("delegate")
	publish(t, e, "child-1", req)
	yieldDrive := func() workflows.DriveSummary {
		t.Helper()
		v, err := e.ExecuteActivity(workflows.ActivityDrive, workflows.DriveInput{
			Provider: subagent.ProviderSpawn, ChildID: "child-1", Request: req, Yield: true,
		})
		require.NoError(t, err)
		var sum workflows.DriveSummary
		require.NoError(t, v.Get(&sum))
		return sum
	}

	sum := yieldDrive()
	require.Len(t, sum.Delegations, 1)
	d := sum.Delegations[0]
	assert.Equal(t, "call_0_0", d.CallID)
	assert.Equal(t, activities.NestedChildID("child-1", "call_0_0"), d.ChildID)
	assert.Equal(t, subagent.ProviderSpawn, d.Provider)
	assert.Equal(t, "child-1", d.Request.Parent.SessionID)
	assert.Empty(t, fc.startedOptions(), "the drive starts no run itself")
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

	sum = yieldDrive()
	assert.Empty(t, sum.Delegations, "a stored result is not delegated again")
	assert.Equal(t, []string{"nested answer"}, subagentResults(t, f, "child-1"))
	out := readResult(t, e, "child-1", req, false)
	assert.Equal(t, subagent.StopCompleted, out.Result.StopReason)
	assert.Equal(t, "parent done", session.JoinText(out.Result.Output))
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
