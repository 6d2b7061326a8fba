// Package activities implements the Temporal activities of StartSubagent (package workflows):
// CreateRootSession, Publish, Drive and ReadResult over the in-process driver (package
// inprocess), and RunSDKChild over the SDK subprocess provider (package sdkproc). They are
// thin adapters: the drivers do the work and know nothing of Temporal; this package adds
// heartbeats, cancellation, worker-stop handling and the mapping of rejections to
// non-retryable application errors (workflows.ToApplicationError).
//
// # Cancellation and worker stop
//
// A cancelled activity context means the workflow was cancelled: Drive aborts the child's
// turn (cause parent) and returns the context's error, RunSDKChild disposes its child and
// returns temporal.NewCanceledError with the aborted Outcome. A closed worker stop channel
// means this worker is going away, not that the run should end: Drive suspends the child
// without ending its turn (agent.Suspend: nothing more is written, the log is synced) and
// returns a retryable error, so the retry on another worker resumes the turn from the
// session store; RunSDKChild disposes its child (a process cannot move) and returns a
// retryable error.
//
// # Nested delegation
//
// Every in-process child gets the `subagent` tool (package subagent, contract; see
// Config.SubagentProvider and Config.SubagentMaxDepth). The drive runs no nested run itself:
// a call is deferred (subagenttool.ErrDeferred), the drive returns the deferred calls to the
// workflow, which starts each as a child workflow, and RecordNested writes their results back
// into the calling child's session as the tool results before the drive resumes the turn
// (docs/nested.md).
package activities
