// Package inprocess is the in-process subagent driver: it runs a delegated child agent
// (spawn: a fresh conversation; fork: seeded with the parent's completed turns) inside this
// process, and the child-scoped structured-output runtime (contract §4, §5).
//
// A delegation has three phases that meet only in the session store, so that each may run
// on a different worker:
//
//   - Host.Create persists the child: header, fork seed, delegated policy events. It is
//     create-if-absent, so a retry with the same child id is a no-op.
//   - Host.Drive opens the child from the store, installs what is never persisted (persona,
//     tool filter, structured output, the delegated-policy runtime context, the descriptor
//     hook), queues the prompt — or resumes the turn a previous drive left unfinished — and
//     returns when the child is idle. Cancelling its context aborts the turn (cause parent).
//   - Host.ReadResult reads output, structured value and stop reason from the stored log.
//
// Host.Start composes the three into the library API: it returns a Run once the child is
// published, and the Run drives the child in the background. The Providers "spawn" and
// "fork" wrap Start as subagent.Provider values. The package knows nothing of Temporal.
package inprocess
