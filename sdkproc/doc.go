// Package sdkproc is the SDK subprocess provider (contract §6): every delegation runs in a fresh
// child runtime process (`worker child-runtime`, or any command speaking the same protocol) driven
// over stdio JSON-RPC (docs/protocol.md).
//
// A Provider is built once from a validated Config (LoadConfig, New). Provider.Start resolves
// the child's working directory, spawns the child with a scrubbed environment in its own
// process group, and completes the initialize handshake before returning the published Run.
// Run.Result sends the prompt and reads the answer from the child's session events; it never
// fails for a child-level fault: those are stop reasons. Run.Dispose stops the child with the
// shutdown → stdin EOF → SIGTERM → SIGKILL ladder and always reaps it.
//
// The package knows nothing of Temporal; activities wrap it and heartbeat Run.Progress.
package sdkproc
