package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/workflows"
)

// DefaultReplayClosed is ReplayOptions.Closed when 0: how many of the latest closed runs the
// gate replays besides the open ones.
const DefaultReplayClosed = 100

// ReplayOptions configure Replay, the replay gate a deploy pipeline runs before it makes a
// build current (docs/deployment.md, "Rolling out a new build").
type ReplayOptions struct {
	// Client fetches the histories of the open runs and the latest Closed closed runs of its
	// namespace, of the workflow types this build registers. Nil with Dirs only.
	Client client.Client
	// Namespace is the client's namespace (the replayer reads it from the history otherwise).
	Namespace string
	// TaskQueues, when set, limit the fetched runs to those of these task queues (the ones
	// the build serves) and of their interactive lanes (workflows.InteractiveQueue), where
	// subflow.Start starts interactive runs; empty means every queue of the namespace.
	TaskQueues []string
	// Closed is how many closed runs to replay besides the open ones; 0 means
	// DefaultReplayClosed, a negative value none.
	Closed int
	// Dirs hold recorded histories (DIR/*.json and DIR/*/*.json, the JSON of `temporal
	// workflow show --output json`), replayed instead of fetched ones.
	Dirs []string
	// DeploymentName and BuildID are the version this build will serve: a run Pinned to
	// another version finishes there and is never replayed here, so it is skipped.
	DeploymentName, BuildID string
	// Workflows registers this build's workflows; nil means as New registers them.
	Workflows func(worker.WorkflowRegistry)
	// Logger receives the replayer's logs; nil logs nothing.
	Logger log.Logger
}

// ReplayReport is what Replay found.
type ReplayReport struct {
	// Replayed names every history that replayed: "workflowID (run runID)", or a file.
	Replayed []string
	// Skipped names the runs pinned to another version, with that version.
	Skipped []string
	// Failed are the histories that do not replay on this build.
	Failed []ReplayFailure
}

// ReplayFailure is one history that does not replay.
type ReplayFailure struct {
	// Run is "workflowID (run runID)" or the file of a recorded history.
	Run string
	Err error
}

func (f ReplayFailure) Error() string { return f.Run + ": " + f.Err.Error() }

// Replay replays histories against this build's workflows with worker.NewWorkflowReplayer.
// A history that cannot be read is a failure of its own; an error means the histories could
// not be listed at all, so nothing is known.
func Replay(ctx context.Context, opts ReplayOptions) (ReplayReport, error) {
	if opts.Workflows == nil {
		opts.Workflows = registerWorkflows
	}
	if opts.Logger == nil {
		// The replayer logs each failure as a workflow panic; the report names them.
		opts.Logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	var rep ReplayReport
	if len(opts.Dirs) > 0 {
		for _, dir := range opts.Dirs {
			files, err := historyFiles(dir)
			if err != nil {
				return rep, err
			}
			for _, f := range files {
				hist, err := readHistoryFile(f)
				if err != nil {
					rep.Failed = append(rep.Failed, ReplayFailure{Run: f, Err: err})
					continue
				}
				rep.replay(opts, f, hist, executionOf(hist))
			}
		}
		return rep, nil
	}
	if opts.Client == nil {
		return rep, errors.New("app: replay: no client and no directory of histories")
	}
	runs, err := listRuns(ctx, opts)
	if err != nil {
		return rep, err
	}
	for _, run := range runs {
		ex := workflow.Execution{ID: run.GetExecution().GetWorkflowId(), RunID: run.GetExecution().GetRunId()}
		name := fmt.Sprintf("%s (run %s)", ex.ID, ex.RunID)
		hist, err := fetchHistory(ctx, opts.Client, ex.ID, ex.RunID)
		if err != nil {
			rep.Failed = append(rep.Failed, ReplayFailure{Run: name, Err: err})
			continue
		}
		rep.replay(opts, name, hist, ex)
	}
	return rep, nil
}

// replay replays one history unless it is pinned to another version.
func (rep *ReplayReport) replay(opts ReplayOptions, name string, hist *historypb.History, ex workflow.Execution) {
	if v := pinnedVersion(hist); v != nil && (v.GetDeploymentName() != opts.DeploymentName || v.GetBuildId() != opts.BuildID) {
		rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: pinned to %s:%s", name, v.GetDeploymentName(), v.GetBuildId()))
		return
	}
	replayer := worker.NewWorkflowReplayer()
	opts.Workflows(replayer)
	if err := replayer.ReplayWorkflowHistoryWithOptions(opts.Logger, hist,
		worker.ReplayWorkflowHistoryOptions{OriginalExecution: ex}); err != nil {
		rep.Failed = append(rep.Failed, ReplayFailure{Run: name, Err: err})
		return
	}
	rep.Replayed = append(rep.Replayed, name)
}

// executionOf is the workflow execution a recorded history belongs to, as far as its start
// event says (workflow code may use its own id, e.g. a batch's id); zero fields take the
// replayer's defaults.
func executionOf(hist *historypb.History) workflow.Execution {
	var ex workflow.Execution
	if evs := hist.GetEvents(); len(evs) > 0 {
		start := evs[0].GetWorkflowExecutionStartedEventAttributes()
		ex.ID, ex.RunID = start.GetWorkflowId(), start.GetOriginalExecutionRunId()
	}
	return ex
}

// pinnedVersion is the version a run is pinned to, from its last completed workflow task;
// nil for a run that is not pinned (unversioned, AutoUpgrade, or no task completed yet),
// which moves to the current version and so must replay on it.
func pinnedVersion(hist *historypb.History) *deploymentpb.WorkerDeploymentVersion {
	evs := hist.GetEvents()
	for i := len(evs) - 1; i >= 0; i-- {
		done := evs[i].GetWorkflowTaskCompletedEventAttributes()
		if done == nil {
			continue
		}
		if done.GetVersioningBehavior() != enumspb.VERSIONING_BEHAVIOR_PINNED {
			return nil
		}
		if v := done.GetDeploymentVersion(); v != nil {
			return v
		}
		// Histories written before DeploymentVersion existed carry the name and id apart.
		//lint:ignore SA1019 older servers fill only these fields
		return &deploymentpb.WorkerDeploymentVersion{DeploymentName: done.GetWorkerDeploymentName(), BuildId: done.GetWorkerDeploymentVersion()}
	}
	return nil
}

// listRuns lists the open runs and the latest opts.Closed closed runs of the workflow types
// this build registers (runs of other programs sharing the namespace are not its business).
func listRuns(ctx context.Context, opts ReplayOptions) ([]*workflowpb.WorkflowExecutionInfo, error) {
	names := registeredNames(opts.Workflows)
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	types := "WorkflowType IN (" + strings.Join(quoted, ", ") + ")"
	if len(opts.TaskQueues) > 0 {
		var queues []string
		for _, q := range opts.TaskQueues {
			queues = append(queues, q)
			if !workflows.IsInteractiveQueue(q) {
				queues = append(queues, workflows.InteractiveQueue(q))
			}
		}
		for i, q := range queues {
			queues[i] = "'" + strings.ReplaceAll(q, "'", "\\'") + "'"
		}
		types += " AND TaskQueue IN (" + strings.Join(queues, ", ") + ")"
	}
	var runs []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		resp, err := opts.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: opts.Namespace, Query: types + " AND ExecutionStatus = 'Running'", NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("app: replay: list the open runs: %w", err)
		}
		runs = append(runs, resp.GetExecutions()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	closed := opts.Closed
	if closed == 0 {
		closed = DefaultReplayClosed
	}
	token = nil
	for n := 0; n < closed; {
		// Visibility lists closed runs latest first.
		resp, err := opts.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: opts.Namespace, Query: types + " AND ExecutionStatus != 'Running'",
			PageSize: int32(min(closed-n, 1000)), NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("app: replay: list the closed runs: %w", err)
		}
		execs := resp.GetExecutions()
		if len(execs) > closed-n {
			execs = execs[:closed-n]
		}
		runs = append(runs, execs...)
		n += len(execs)
		if token = resp.GetNextPageToken(); len(token) == 0 || len(execs) == 0 {
			break
		}
	}
	return runs, nil
}

// registeredNames are the workflow type names register registers.
func registeredNames(register func(worker.WorkflowRegistry)) []string {
	var rec nameRecorder
	register(&rec)
	sort.Strings(rec.names)
	return rec.names
}

// nameRecorder is a worker.WorkflowRegistry that only notes the names.
type nameRecorder struct{ names []string }

// RegisterWorkflow notes the name the SDK gives w: its function's.
func (r *nameRecorder) RegisterWorkflow(w any) {
	name := runtime.FuncForPC(reflect.ValueOf(w).Pointer()).Name()
	r.names = append(r.names, strings.TrimSuffix(name[strings.LastIndex(name, ".")+1:], "-fm"))
}

func (r *nameRecorder) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	r.names = append(r.names, o.Name)
}

func (r *nameRecorder) RegisterDynamicWorkflow(any, workflow.DynamicRegisterOptions) {}

// fetchHistory reads the history of one run as far as it goes.
func fetchHistory(ctx context.Context, c client.Client, workflowID, runID string) (*historypb.History, error) {
	hist := &historypb.History{}
	iter := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return nil, fmt.Errorf("read history: %w", err)
		}
		hist.Events = append(hist.Events, ev)
	}
	return hist, nil
}

// historyFiles are the recorded histories under dir: dir/*.json and dir/*/*.json.
func historyFiles(dir string) ([]string, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("app: replay: histories: %w", err)
	}
	var files []string
	for _, pattern := range []string{"*.json", filepath.Join("*", "*.json")} {
		found, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, fmt.Errorf("app: replay: list %s: %w", dir, err)
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("app: replay: no recorded history (*.json) in %s", dir)
	}
	return files, nil
}

// readHistoryFile reads a history in the JSON of `temporal workflow show --output json`.
func readHistoryFile(path string) (*historypb.History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	return hist, nil
}
