// Package workflows holds the deterministic Temporal code of subflow: the StartSubagent
// workflow, the names and payload types it shares with the activities that implement its
// steps (package activities) and with the programs that start it. Programs start and
// inspect runs through package subflow, the module root (Start, Describe).
//
// The package does no I/O and imports none of this module's I/O packages (the session
// stores, the tools, the providers, the activities): TestWorkflowsStayPure enforces it.
//
// # One run
//
// StartSubagent validates a request without I/O (contract R-4, the static provider table of package subagent),
// then, for in-process providers, runs the activities CreateRootSession (only when the
// request has no parent session, contract R-82), Publish, Drive and ReadResult, which meet in
// the session store; for remote providers (subagent.IsRemote) it runs RunSDKChild, one heartbeated
// activity that owns the child process from spawn to dispose. Transcripts never enter
// workflow history (contract R-74): payloads are ids, small summaries and the result.
//
// # Child ids
//
// The child id is the child session id of an in-process run and the run id of a remote one.
// StartInput.ChildID, when set, is used unchanged; when empty the workflow generates a UUID
// in a side effect, so replays and retried activities see the same id. Callers that need
// the id before starting (to name the workflow "subagent-<childId>", see WorkflowID) choose
// it themselves: subflow.Start does exactly that when StartOptions.Input.ChildID is empty.
//
// # Contract for the activities
//
// Activities are called by name (ActivityPublish, …) with the input types of this package.
// A request rejected by a rule (a *subagent.ValidationError, a depth past maxDepth, a cwd
// rule) must come back as a non-retryable ApplicationError whose Type is the rule and whose
// message is the exact user-visible message: ToApplicationError builds it. The workflow
// passes such an error on unchanged to the update caller and fails with it. Any other
// non-retryable ApplicationError from CreateRootSession, Publish or RunSDKChild before
// publication is treated the same way.
//
// Drive and RunSDKChild heartbeat Progress values at least once a second; on cancellation
// Drive aborts the child's turn and returns, and RunSDKChild returns
// temporal.NewCanceledError(outcome) carrying the aborted Outcome. Publish must be
// idempotent for a given child id (create-if-absent), since it is retried.
package workflows
