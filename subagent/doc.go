// Package subagent is the seam between callers that delegate work to a child agent and the
// providers that run such children (the in-process driver, the SDK subprocess provider).
//
// It defines what crosses the seam — Request, Result, StopReason, Capabilities, the Provider
// and Run interfaces and the one static provider table (ProviderCapabilities, IsRemote) —
// and the rules every provider and caller shares: the start checks (CheckStart,
// CheckRequest), delegation depth (ChildDepth),
// output selection over a child's events (Collector, SelectOutput), the stop-reason tables
// (InProcessStopReason, SDKStopReason), the descriptor event payload, the tool-facing
// renderings (ToolError, RenderResult), the maxDepth setting of the subagent tool
// (MaxDepthSetting), the accepted JSON schema subset for structured output (CheckSchema,
// CompileSchema, ValidateValue).
//
// Every start-check failure is a *ValidationError whose Error() is the exact user-visible
// message and whose Rule is a short stable kebab-case name; a depth overflow past maxDepth is
// a *DepthError that also unwraps to a *ValidationError, so
//
//	var ve *subagent.ValidationError
//	if errors.As(err, &ve) { /* non-retryable, error type ve.Rule */ }
//
// recognises all of them alike.
//
// The package does no I/O, so workflow code may import it (an import test in package
// workflows enforces it). What needs I/O lives beside it: the model-facing subagent tool in
// subagent/tool (it builds on harness/tools) and the working-directory rules, which stat the
// chosen directory, in subagent/workdir.
package subagent
