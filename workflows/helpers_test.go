package workflows

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// waitLimit only keeps a broken test from hanging; no test asserts a duration.
const waitLimit = 10 * time.Second

// fakes stands in for package activities. Each activity is registered under its name and
// records its inputs; the func fields replace the default behaviour.
type fakes struct {
	mu      sync.Mutex
	calls   []string
	local   []string // the calls that ran as local activities
	roots   []CreateRootSessionInput
	publish []ChildInput
	drives  []ChildInput
	reads   []ReadResultInput
	sdks    []SDKInput
	nested  []RecordNestedInput

	onRoot    func(context.Context) error
	onPublish func(context.Context, ChildInput) (Published, error)
	onDrive   func(context.Context, ChildInput) (DriveSummary, error)
	onSDK     func(context.Context, SDKInput) (Outcome, error)
}

func (f *fakes) record(ctx context.Context, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	if activity.GetInfo(ctx).IsLocalActivity {
		f.local = append(f.local, name)
	}
}

func (f *fakes) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// Local returns the calls that ran as local activities.
func (f *fakes) Local() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.local...)
}

func (f *fakes) CreateRootSession(ctx context.Context, in CreateRootSessionInput) (subagent.ParentRef, error) {
	f.record(ctx, ActivityCreateRootSession)
	f.mu.Lock()
	f.roots = append(f.roots, in)
	f.mu.Unlock()
	if f.onRoot != nil {
		if err := f.onRoot(ctx); err != nil {
			return subagent.ParentRef{}, err
		}
	}
	return subagent.ParentRef{SessionID: in.SessionID, Cwd: in.Root.Cwd}, nil
}

func (f *fakes) Publish(ctx context.Context, in ChildInput) (Published, error) {
	f.record(ctx, ActivityPublish)
	f.mu.Lock()
	f.publish = append(f.publish, in)
	f.mu.Unlock()
	if f.onPublish != nil {
		return f.onPublish(ctx, in)
	}
	return Published{ChildID: in.ChildID, Depth: 2}, nil
}

func (f *fakes) Drive(ctx context.Context, in ChildInput) (DriveSummary, error) {
	f.record(ctx, ActivityDrive)
	f.mu.Lock()
	f.drives = append(f.drives, in)
	f.mu.Unlock()
	if f.onDrive != nil {
		return f.onDrive(ctx, in)
	}
	return DriveSummary{Steps: 3, StreamedBytes: 120, OutputTokens: 40}, nil
}

func (f *fakes) ReadResult(ctx context.Context, in ReadResultInput) (Outcome, error) {
	f.record(ctx, ActivityReadResult)
	f.mu.Lock()
	f.reads = append(f.reads, in)
	f.mu.Unlock()
	if in.Cancelled {
		return Outcome{ChildID: in.ChildID, Depth: 2, Result: subagent.Result{
			Output: []session.Block{session.Text("partial")}, StopReason: subagent.StopAborted}}, nil
	}
	return Outcome{ChildID: in.ChildID, Depth: 2, Result: subagent.Result{
		Output: []session.Block{session.Text("done")}, StopReason: subagent.StopCompleted},
		Usage: session.Usage{InputTokens: 30, OutputTokens: 4}}, nil
}

func (f *fakes) RecordNested(ctx context.Context, in RecordNestedInput) error {
	f.record(ctx, ActivityRecordNested)
	f.mu.Lock()
	f.nested = append(f.nested, in)
	f.mu.Unlock()
	return nil
}

func (f *fakes) RunSDKChild(ctx context.Context, in SDKInput) (Outcome, error) {
	f.record(ctx, ActivityRunSDKChild)
	f.mu.Lock()
	f.sdks = append(f.sdks, in)
	f.mu.Unlock()
	if f.onSDK != nil {
		return f.onSDK(ctx, in)
	}
	return Outcome{ChildID: in.RunID, Depth: 1, Result: subagent.Result{
		Output: []session.Block{session.Text("sdk done")}, StopReason: subagent.StopCompleted}}, nil
}

// harness is one test workflow environment with the fakes registered, the search
// attributes the workflow upserted, and the published update's answer.
type harness struct {
	env   *testsuite.TestWorkflowEnvironment
	fakes *fakes
	mu    sync.Mutex
	attrs map[string]any
	// upserts are the keys of each search attribute upsert, in order.
	upserts [][]string
	update  *updateAnswer
	// bareStart starts the run without the search attributes every starter sets
	// (StartAttributes), as a run started by hand may be.
	bareStart bool
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	h := &harness{env: suite.NewTestWorkflowEnvironment(), fakes: &fakes{}, attrs: map[string]any{}}
	h.env.SetTestTimeout(waitLimit)
	h.env.RegisterWorkflowWithOptions(StartSubagent, workflow.RegisterOptions{Name: WorkflowName})
	for name, fn := range map[string]any{
		ActivityCreateRootSession: h.fakes.CreateRootSession,
		ActivityPublish:           h.fakes.Publish,
		ActivityDrive:             h.fakes.Drive,
		ActivityReadResult:        h.fakes.ReadResult,
		ActivityRunSDKChild:       h.fakes.RunSDKChild,
		ActivityRecordNested:      h.fakes.RecordNested,
	} {
		h.env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		h.mu.Lock()
		defer h.mu.Unlock()
		var keys []string
		for k, v := range args.Get(0).(temporal.SearchAttributes).GetUntypedValues() {
			h.attrs[k.GetName()] = v
			keys = append(keys, k.GetName())
		}
		slices.Sort(keys)
		h.upserts = append(h.upserts, keys)
	}).Return(nil)
	return h
}

// sendUpdate sends the published update as Update-with-Start does: before the first
// workflow task runs.
func (h *harness) sendUpdate() *updateAnswer {
	u := &updateAnswer{done: make(chan struct{})}
	h.update = u
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(UpdatePublished, "start", &testsuite.TestUpdateCallback{
			OnAccept:   func() {},
			OnReject:   func(err error) { u.set(nil, err) },
			OnComplete: func(v any, err error) { u.set(v, err) },
		})
	}, 0)
	return u
}

// run runs StartSubagent to its end, started as subflow.Start starts it: with the search
// attributes StartAttributes returns (unless bareStart), which Attrs then includes.
func (h *harness) run(t *testing.T, in StartInput) {
	t.Helper()
	if !h.bareStart {
		start := temporal.NewSearchAttributes(StartAttributes(in)...)
		require.NoError(t, h.env.SetTypedSearchAttributesOnStart(start))
		h.mu.Lock()
		for k, v := range start.GetUntypedValues() {
			h.attrs[k.GetName()] = v
		}
		h.mu.Unlock()
	}
	h.env.ExecuteWorkflow(StartSubagent, in)
	require.True(t, h.env.IsWorkflowCompleted())
}

// Upserts returns the keys of each search attribute upsert, in order.
func (h *harness) Upserts() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.upserts
}

// Attrs returns the search attributes of the run: those set at start and upserted since.
func (h *harness) Attrs() map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.attrs
}

// updateAnswer is what the caller of the published update got.
type updateAnswer struct {
	mu   sync.Mutex
	done chan struct{}
	set1 bool
	pub  Published
	err  error
}

func (u *updateAnswer) set(v any, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.set1 {
		return
	}
	u.set1 = true
	if p, ok := v.(Published); ok {
		u.pub = p
	}
	u.err = err
	close(u.done)
}

func (u *updateAnswer) get(t *testing.T) (Published, error) {
	t.Helper()
	select {
	case <-u.done:
	default:
		t.Fatal("the published update never completed")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pub, u.err
}

func spawnInput() StartInput {
	return StartInput{
		Provider: subagent.ProviderSpawn,
		ChildID:  "child-1",
		Batch:    "batch-7",
		Request: subagent.Request{
			Label:        "summarise",
			Prompt:       []session.Block{session.Text("summarise the repo")},
			Parent:       subagent.ParentRef{SessionID: "parent-1", Cwd: "/work"},
			AgentOptions: session.Route{Model: "model-a"},
		},
	}
}

// closed waits for ch to be closed and reports whether it was, within waitLimit. It is
// safe off the test goroutine (in fakes and delayed callbacks).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(waitLimit):
		return false
	}
}

func ptr[T any](v T) *T { return &v }

// whenClosed runs fn on the test environment's loop once ch is closed, polling without
// blocking the loop (the workflow and its activities must keep running meanwhile).
func (h *harness) whenClosed(ch <-chan struct{}, fn func()) {
	var poll func()
	poll = func() {
		select {
		case <-ch:
			fn()
		default:
			h.env.RegisterDelayedCallback(poll, 10*time.Millisecond)
		}
	}
	h.env.RegisterDelayedCallback(poll, 10*time.Millisecond)
}

// blockUntilCancelled parks a fake activity until its context is cancelled or the test ends.
func blockUntilCancelled(t *testing.T) func(ctx context.Context) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-release:
		}
	}
}
