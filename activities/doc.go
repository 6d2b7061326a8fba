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
// Every in-process child gets the `subagent` tool (package subagent, SPEC; see
// Config.SubagentProvider and Config.SubagentMaxDepth). A call starts a nested StartSubagent
// run on the drive's task queue whose parent session is the calling child, and waits for it
// while the drive heartbeats. The nested workflow id is derived from the calling session and
// the tool call id (NestedChildID), so a call that runs again after a worker stop attaches to
// the run it started. Cancelling the drive cancels the nested run, whose aborted outcome
// becomes the tool result; suspending it (worker stop) leaves the nested run running.
package activities
