// Package activities implements the Temporal activities of the workflows of package workflows,
// as thin adapters over the runtime: each decodes its input, calls the runtime, heartbeats
// while it runs, and maps what the runtime returned to what the workflow expects, rejections
// becoming non-retryable application errors (workflows.ToApplicationError). The runtime knows
// nothing of Temporal:
//
//   - CreateRootSession, Publish, Drive and ReadResult drive an in-process child (package
//     inprocess);
//   - RunSDKChild runs an sdk child process from spawn to dispose (package sdkproc);
//   - RecordNested writes the results of a drive's nested runs into its child's session;
//   - StorePayload and ReadPayload keep what is too big for a workflow's history, and
//     SaveBatchPage, LoadBatchPage and RemoveBatchPages a batch's pages, as blobs in the
//     session store (package harness/session/blob);
//   - AwaitChild waits for a batch child started by an earlier run of its batch;
//   - CleanupCutoff and CleanupPage remove what runs Temporal no longer keeps stored;
//   - CheckTargetBuild tells a long-lived workflow whether the deployment's new target build
//     can run it (subflow.TargetReady) before it continues as new onto that build.
//
// The model requests of in-process drives and sdk children go through the cluster-wide
// admission of package internal/admission when the worker limits a provider.
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
// Every in-process child gets the `subagent` tool (package subagent/tool; see
// Config.SubagentProvider and Config.SubagentMaxDepth). No activity runs a nested run itself:
// Drive defers each call (subagenttool.ErrDeferred) and returns the deferred calls to the
// workflow, which starts each as a StartSubagent child workflow; once they closed,
// RecordNested reads their results from their workflows and stores them as the calls' tool
// results, and the next Drive resumes the turn (docs/nested.md). An sdk child's calls reach
// RunSDKChild, which asks its own workflow to start each as a child workflow (the sdk-delegate
// update) and answers the call with the run's result.
package activities
