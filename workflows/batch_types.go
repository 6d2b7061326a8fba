package workflows

import (
	"encoding/json"

	"github.com/subflow-dev/subflow/subagent"
)

// BatchWorkflowName is the registered name of Batch.
const BatchWorkflowName = "Batch"

// QueryProgress is the query of Batch; it returns a BatchSummary.
const QueryProgress = "progress"

// Activity names of Batch.
const (
	ActivityReadBatchTasks     = "ReadBatchTasks"
	ActivityAppendBatchResults = "AppendBatchResults"
)

// Defaults of BatchInput.
const (
	DefaultBatchConcurrency = 10
	// DefaultContinueAsNewAfter keeps a run's history near 5,000 events with small
	// results, a tenth of the 51,200-event limit (DESIGN "Temporal conventions").
	DefaultContinueAsNewAfter = 500
)

// BatchInput is the input of Batch. Tasks are started in order: first Tasks, then the tasks
// of TasksFile from State.FileOffset on. Every task is numbered by its position (from 0),
// which names its result.
type BatchInput struct {
	// BatchID is the SubagentBatch search attribute of every child and seeds the child ids;
	// empty means the batch's workflow id.
	BatchID string `json:"batchId,omitempty"`
	// Tasks are inline tasks: a few hundred at most, since the input is one payload (2 MiB).
	Tasks []Task `json:"tasks,omitempty"`
	// TasksFile is the absolute path of a JSONL file of tasks (one Task a line, blank lines
	// skipped) that the worker reads in pages with ReadBatchTasks.
	TasksFile string `json:"tasksFile,omitempty"`
	// Total is the number of tasks when the caller knows it; 0 lets the batch count them.
	Total int `json:"total,omitempty"`
	// OutFile is the absolute path of the JSONL file the worker writes one BatchResult a
	// line to, in the order tasks finish; empty writes no results.
	OutFile string `json:"outFile,omitempty"`
	// Defaults completes every task (see Task.StartInput).
	Defaults TaskDefaults `json:"defaults,omitzero"`
	// Concurrency is the most children running at once; 0 means DefaultBatchConcurrency.
	Concurrency int `json:"concurrency,omitempty"`
	// ContinueAsNewAfter is how many children one run starts before it continues as new;
	// 0 means DefaultContinueAsNewAfter.
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
	// TaskQueue is the children's task queue; empty means the batch's.
	TaskQueue string `json:"taskQueue,omitempty"`
	// State is set by the batch itself when it continues as new; callers leave it nil.
	State *BatchState `json:"state,omitempty"`
}

// BatchState is what a Batch run hands to the next one when it continues as new.
type BatchState struct {
	// Next is the number of the first task of BatchInput.Tasks.
	Next int `json:"next"`
	// FileOffset and FileLine are where the next page of TasksFile starts: its byte offset
	// and the number of lines before it. FileDone says the file is read to its end.
	FileOffset int64 `json:"fileOffset,omitempty"`
	FileLine   int   `json:"fileLine,omitempty"`
	FileDone   bool  `json:"fileDone,omitempty"`
	// OutOffset is the size of OutFile written so far.
	OutOffset int64        `json:"outOffset,omitempty"`
	Summary   BatchSummary `json:"summary"`
}

// BatchSummary is where a batch stands: the answer to QueryProgress, the result of Batch,
// and the details of a cancelled Batch's CanceledError. Running and Queued are 0 in a
// finished batch's summary; Queued counts the tasks a cancelled batch never started.
type BatchSummary struct {
	BatchID string `json:"batchId"`
	// Total is the number of tasks; it is 0 until a batch reading a file without a given
	// Total has read the file's first page.
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
	Runs    int    `json:"runs"`
	OutFile string `json:"outFile,omitempty"`
	// Concurrency, Paused and Cancelled are BatchV2's live controls.
	Concurrency int  `json:"concurrency,omitempty"`
	Paused      bool `json:"paused,omitempty"`
	Cancelled   bool `json:"cancelled,omitempty"`
	// InputTokens and OutputTokens sum the usage of the finished tasks (BatchV2).
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// StartErrors are BatchV2's tasks that could not start (at most 1,000): they have no
	// workflow, so `starter batch results` reads them from here.
	StartErrors []BatchResult `json:"startErrors,omitempty"`
}

// Completed reports whether every task of the batch ended completed.
func (s BatchSummary) Completed() bool {
	return s.Done == s.Total && s.ByStopReason[subagent.StopCompleted] == s.Total
}

// BatchResult is one line of a batch's OutFile: the result of task Index.
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
	Error      string `json:"error,omitempty"`
	DurationMs int64  `json:"durationMs"`
	// ResultRef is the task's result stored by reference (Outcome.ResultRef): Output and
	// Structured are then empty until AppendBatchResults fills them from the store, which
	// never writes a ResultRef into the results file.
	ResultRef *PayloadRef `json:"resultRef,omitempty"`
	// InputTokens and OutputTokens are the run's token usage (BatchV2).
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
}

// ReadBatchTasksInput is the input of ReadBatchTasks: read at most Limit tasks of Path from
// byte Offset, which follows Line lines (for error messages).
type ReadBatchTasksInput struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Line   int    `json:"line"`
	Limit  int    `json:"limit"`
}

// ReadBatchTasksOutput is a page of tasks, with where the next page starts. Done says the
// file ends after this page. Total is the number of tasks of the whole file, counted only
// for a read from Offset 0.
type ReadBatchTasksOutput struct {
	Tasks  []Task `json:"tasks"`
	Offset int64  `json:"offset"`
	Line   int    `json:"line"`
	Done   bool   `json:"done"`
	Total  int    `json:"total,omitempty"`
}

// AppendBatchResultsInput is the input of AppendBatchResults: make Path Offset bytes long
// (creating it when Offset is 0) and append Results, one JSON line each. Truncating first
// makes a retried call idempotent. The activity returns the new size.
type AppendBatchResultsInput struct {
	Path    string        `json:"path"`
	Offset  int64         `json:"offset"`
	Results []BatchResult `json:"results"`
}
