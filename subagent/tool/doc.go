// Package tool is the model-facing `subagent` tool (contract R-9): the tool an agent calls to
// delegate a task to a child agent. New builds it over a delegate function; the call's
// input becomes a subagent.Request, and the child's result (or the rejection's exact
// message) becomes the tool result (ToolResult). A worker that runs delegations as child
// workflows defers each call instead (ErrDeferred) and hands the result back later; nested
// runs take deterministic ids from the asking session and call (NestedChildID).
package tool
