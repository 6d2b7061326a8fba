package workflows

import (
	"encoding/json"
	"time"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// BatchWorkflowName is the registered name of Batch, the batch `starter batch` starts.
const BatchWorkflowName = "Batch"

// QueryProgress is the query of Batch; it returns a BatchSummary.
const QueryProgress = "progress"

// Defaults of BatchInput.
const (
	DefaultBatchConcurrency = 10
	// DefaultContinueAsNewAfter keeps a run's history near 5,000 events with small
	// results, a tenth of the 51,200-event limit (docs/temporal.md).
	DefaultContinueAsNewAfter = 500
)

// BatchSummary is where a batch stands: the answer to QueryProgress, the result of Batch,
// and the details of a cancelled Batch's CanceledError. Running and Queued are 0 in a
// finished batch's summary; Queued counts the tasks a cancelled batch never started.
type BatchSummary struct {
	BatchID string `json:"batchId"`
	// Total is the number of tasks, inline and paged.
	Total   int `json:"total"`
	Queued  int `json:"queued"`
	Running int `json:"running"`
	// Done counts the finished tasks, Failed those among them without an outcome (rejected,
	// failed, or not startable); the others are counted by stop reason.
	Done         int                         `json:"done"`
	Failed       int                         `json:"failed"`
	ByStopReason map[subagent.StopReason]int `json:"byStopReason,omitempty"`
	Durations    Durations                   `json:"durations"`
	// Runs counts the workflow runs the batch used (1 + its continue-as-new count).
	Runs int `json:"runs"`
	// OutFile is the file `starter batch --out` wrote the results to; the workflow leaves it
	// empty.
	OutFile string `json:"outFile,omitempty"`
	// Concurrency, Paused and Cancelled are the batch's live controls.
	Concurrency int  `json:"concurrency,omitempty"`
	Paused      bool `json:"paused,omitempty"`
	Cancelled   bool `json:"cancelled,omitempty"`
	// InputTokens and OutputTokens sum the usage of the finished tasks.
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// Priority is the batch's task-queue priority and fairness, which its children and their
	// activities inherit; nil when it has none.
	Priority *Priority `json:"priority,omitempty"`
	// StartErrors are the batch's tasks that could not start (at most 1,000): they have no
	// workflow, so `starter batch results` reads them from here.
	StartErrors []BatchResult `json:"startErrors,omitempty"`
	// Started is when the batch's first run started: the batch page's rate counts from it.
	Started time.Time `json:"started,omitzero"`
	// LastFailed are the last five tasks that ended otherwise than completed, newest last:
	// index, label, workflow id, and the stop reason or the error, for the batch page.
	LastFailed []BatchResult `json:"lastFailed,omitempty"`
	// BuildHeld says why the batch stays on its build though the deployment's current
	// version changed: the new build's workers do not poll its queue (docs/deployment.md,
	// "Rolling out a new build"). Empty when it does not.
	BuildHeld string `json:"buildHeld,omitempty"`
	// Unanswered says why the summary is not the batch's live progress: its run did not
	// answer the query in time (no worker of its build polls, or its workflow task is slow to
	// complete: the message says which); Done, Running and Queued are then counted from the
	// batch's children in visibility, the other figures are those the run started with
	// (subflow.BatchSummaryOf). Empty for a live or final summary.
	Unanswered string `json:"unanswered,omitempty"`
}

// Completed reports whether every task of the batch ended completed.
func (s BatchSummary) Completed() bool {
	return s.Done == s.Total && s.ByStopReason[subagent.StopCompleted] == s.Total
}

// BatchResult is the result of task Index of a batch: one line of the file `starter batch
// results` (or `--out`) writes, read from the task's run through Temporal.
type BatchResult struct {
	Index      int                 `json:"index"`
	Label      string              `json:"label,omitempty"`
	WorkflowID string              `json:"workflowId,omitempty"`
	ChildID    string              `json:"childId,omitempty"`
	Depth      int64               `json:"depth,omitempty"`
	StopReason subagent.StopReason `json:"stopReason,omitempty"`
	Output     string              `json:"output"`
	Structured json.RawMessage     `json:"structured,omitempty"`
	// Error is why the task has no outcome: the rejection's exact message, or the failure.
	Error string `json:"error,omitempty"`
	// EndMessage is why the task's turn ended, when an error ended it (Outcome.EndMessage).
	EndMessage string `json:"endMessage,omitempty"`
	DurationMs int64  `json:"durationMs"`
	// InputTokens and OutputTokens are the run's token usage.
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
}

// Updates of Batch. Each is answered with the batch's BatchSummary after the change.
const (
	// UpdateAddTasks hands the batch one TaskPage; see Batch.
	UpdateAddTasks = "add-tasks"
	// UpdatePause stops starting children; running ones go on.
	UpdatePause = "pause"
	// UpdateResume starts children again after UpdatePause.
	UpdateResume = "resume"
	// UpdateResize sets the concurrency (an int, at least 1).
	UpdateResize = "resize"
	// UpdateCancel cancels the batch: nothing more starts, every running child is cancelled
	// and ends aborted with its partial output. The batch then completes with Cancelled set.
	UpdateCancel = "cancel"
)

// Activity names of Batch.
const (
	ActivitySaveBatchPage    = "SaveBatchPage"
	ActivityLoadBatchPage    = "LoadBatchPage"
	ActivityRemoveBatchPages = "RemoveBatchPages"
	ActivityAwaitChild       = "AwaitChild"
	// ActivityRetainTaskParents records the batch as an owner of the parent sessions its
	// inline tasks name (docs/durability.md, "Retention"); pages are retained by
	// SaveBatchPage.
	ActivityRetainTaskParents = "RetainTaskParents"
)

// MemoBatchIndex is the memo key of a batch child holding its task's number.
const MemoBatchIndex = "subflowBatchIndex"

// BatchChildWorkflowID is the workflow id of task n's child in batch, unless the task names
// its own (Task.ID): derived from the batch id and the task number alone, so a client finds
// every child of a finished batch without visibility (docs/batches.md).
func BatchChildWorkflowID(batch string, n int) string {
	return WorkflowID(batchChildID(batch, n))
}

// MaxPageTasks bounds the tasks of one TaskPage; the starter also keeps a page under 1 MiB.
const MaxPageTasks = 500

// TaskPage is the argument of UpdateAddTasks: tasks First … First+len(Tasks)-1 of the batch.
// Page numbers start at 0 and pages come in order; a page the batch already holds is
// acknowledged again without change, so a starter may resend after an error.
type TaskPage struct {
	Page  int    `json:"page"`
	First int    `json:"first"`
	Tasks []Task `json:"tasks"`
}

// PageRef is where one stored page of a batch lies: its number and the tasks it holds.
type PageRef struct {
	Page  int `json:"page"`
	First int `json:"first"`
	Count int `json:"count"`
}

// BatchPageInput is the input of SaveBatchPage (with Tasks), LoadBatchPage and
// RemoveBatchPages (Page is then the count of pages to remove).
type BatchPageInput struct {
	BatchID string `json:"batchId"`
	Page    int    `json:"page"`
	Tasks   []Task `json:"tasks,omitempty"`
}

// RetainTaskParentsInput is the input of RetainTaskParents: the parent sessions of tasks of
// batch BatchID not started yet, each once.
type RetainTaskParentsInput struct {
	BatchID  string   `json:"batchId"`
	Sessions []string `json:"sessions"`
}

// TaskParents returns the parent sessions tasks name, each once, in the order first named.
func TaskParents(tasks []Task) []string {
	var ids []string
	seen := map[string]bool{}
	for _, t := range tasks {
		if t.Parent != "" && !seen[t.Parent] {
			seen[t.Parent] = true
			ids = append(ids, t.Parent)
		}
	}
	return ids
}

// RunningTask is a child a Batch run started and hands to the next run when it continues
// as new; the next run awaits it with AwaitChild.
type RunningTask struct {
	Index      int       `json:"index"`
	Label      string    `json:"label,omitempty"`
	WorkflowID string    `json:"workflowId"`
	ChildID    string    `json:"childId"`
	Started    time.Time `json:"started"`
}

// AwaitChildInput is the input of AwaitChild: wait for the workflow WorkflowID to close and
// return its ChildResult.
type AwaitChildInput struct {
	WorkflowID string `json:"workflowId"`
}

// ChildResult is how a batch child ended: its Outcome, or Error (the rejection's message or
// the failure) when it has none.
type ChildResult struct {
	Outcome Outcome `json:"outcome"`
	Error   string  `json:"error,omitempty"`
}

// BatchState is what a Batch run hands to the next when it continues as new.
type BatchState struct {
	// Next is the number of the first task of BatchInput.Tasks.
	Next  int       `json:"next"`
	Pages []PageRef `json:"pages,omitempty"`
	// Stored is the number of tasks the batch holds, inline and in pages.
	Stored      int           `json:"stored"`
	Running     []RunningTask `json:"running,omitempty"`
	Paused      bool          `json:"paused,omitempty"`
	Concurrency int           `json:"concurrency"`
	Summary     BatchSummary  `json:"summary"`
}

// BatchInput is the input of Batch.
type BatchInput struct {
	// BatchID is the SubagentBatch search attribute of every child and seeds the child ids;
	// empty means the batch's workflow id.
	BatchID string `json:"batchId,omitempty"`
	// Tasks are the first tasks, inline (numbered from 0); the others come in pages by
	// UpdateAddTasks.
	Tasks []Task `json:"tasks,omitempty"`
	// Total is the number of tasks, inline and paged: the batch ends once Total tasks ran.
	Total int `json:"total"`
	// Defaults completes every task (see Task.StartInput).
	Defaults TaskDefaults `json:"defaults,omitzero"`
	// Concurrency is the most children running at once; 0 means DefaultBatchConcurrency.
	Concurrency int `json:"concurrency,omitempty"`
	// ContinueAsNewAfter is how many children one run starts before it continues as new;
	// 0 means DefaultContinueAsNewAfter.
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
	// TaskQueue is the children's task queue; empty means the batch's.
	TaskQueue string `json:"taskQueue,omitempty"`
	// RetryOf is the batch this one retries (the SubagentRetryOf search attribute).
	RetryOf string `json:"retryOf,omitempty"`
	// State is set by the batch itself when it continues as new; callers leave it nil.
	State *BatchState `json:"state,omitempty"`
	// concurrencyGiven records a concurrency present in the decoded JSON, so that a given
	// zero is refused (CheckBatchInput) rather than read as the default.
	concurrencyGiven bool
}

// UnmarshalJSON decodes a BatchInput, noting a concurrency given as 0, which
// CheckBatchInput refuses where a missing one means DefaultBatchConcurrency.
func (in *BatchInput) UnmarshalJSON(data []byte) error {
	type plain BatchInput // without the method
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	p.concurrencyGiven = jsonFieldGiven(data, "concurrency")
	*in = BatchInput(p)
	return nil
}

// MarshalJSON encodes a BatchInput as its fields say, keeping a concurrency given as 0, so
// that the input a worker decoded encodes to one it refuses again.
func (in BatchInput) MarshalJSON() ([]byte, error) {
	type plain BatchInput // without the method
	raw, err := json.Marshal(plain(in))
	if err != nil || !in.concurrencyGiven || in.Concurrency != 0 || len(raw) < 2 {
		return raw, err
	}
	return append(raw[:len(raw)-1], `,"concurrency":0}`...), nil
}

// countOutcome adds a finished task to s: by stop reason, or as failed.
func (s *BatchSummary) countOutcome(stop subagent.StopReason, took time.Duration, usage session.Usage) {
	s.Done++
	if stop == "" {
		s.Failed++
	} else {
		s.ByStopReason[stop]++
	}
	s.Durations.Add(took)
	s.InputTokens += usage.InputTokens
	s.OutputTokens += usage.OutputTokens
}
