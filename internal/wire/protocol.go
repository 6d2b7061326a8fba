package wire

import (
	"encoding/json"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// Methods and notifications of the child-runtime protocol (contract R-61…R-64).
const (
	MethodInitialize    = "initialize"
	MethodSessionPrompt = "session/prompt"
	MethodShutdown      = "shutdown"

	// MethodSubagentRun is the one request the runtime sends the client (a subflow
	// extension): run a delegation its subagent tool asked for and answer with its result.
	MethodSubagentRun = "subagent/run"
	// MethodModelAdmit and MethodModelRelease are the runtime's requests (a subflow
	// extension) around each model request to a provider that initialize named in
	// Admission: model/admit waits for the client's permit, model/release gives it back.
	MethodModelAdmit   = "model/admit"
	MethodModelRelease = "model/release"

	NotifySessionEvent     = "session.event"
	NotifySessionStatus    = "session.status"
	NotifySubagentStarted  = "subagent.started"
	NotifySubagentFinished = "subagent.finished"
)

// ServerName is the name the child runtime reports in InitializeResult.
const ServerName = "deepseek-harness-sdk-runtime"

// Session statuses carried by session.status.
const (
	StatusRunning = "running"
	StatusIdle    = "idle"
)

// InitializeParams are the params of initialize. MaxTokens is kept as a JSON number (nil when
// absent) so the runtime can reject a non-integer with the exact message of R-61.
//
// Sandbox and MaxDepth are the subflow extension of R-61: the delegating parent's sandbox mode
// ("" when it set none) and the delegation depth that remains below the runtime's sessions
// (absent when uncapped; 0 forbids the runtime's own delegations). A runtime enforces them on
// its tools and its nested delegations.
//
// TraceParent is the W3C traceparent of the span the run belongs to, absent when the
// delegating worker does not trace: a runtime that traces makes it the parent of its own
// spans, so they join the delegation's trace (docs/tracing.md).
type InitializeParams struct {
	Cwd       string          `json:"cwd"`
	Provider  string          `json:"provider"`
	Model     string          `json:"model"`
	MaxTokens json.RawMessage `json:"maxTokens,omitempty"`
	Sandbox   string          `json:"sandbox,omitempty"`
	MaxDepth  json.RawMessage `json:"maxDepth,omitempty"`
	// Protected are absolute directories the runtime's file tools must refuse whatever the
	// cwd, besides its own session store: the client's state (its session store, payloads).
	// Roots, when set, are the workspace roots the client serves: every tool call's cwd,
	// resolved, must lie under one. HardLinkRoots are those of the roots whose hard links
	// the client's operator trusts (tools.Env.HardLinkRoots): elsewhere the file tools do not
	// read a file with more than one hard link. All three are subflow extensions
	// (docs/protocol.md).
	Protected     []string `json:"protected,omitempty"`
	Roots         []string `json:"roots,omitempty"`
	HardLinkRoots []string `json:"hardLinkRoots,omitempty"`

	TraceParent string `json:"traceparent,omitempty"`
	// Admission names the model providers whose requests the client admits (its
	// cluster-wide concurrency limits): the runtime asks model/admit before each request to
	// one of them and sends model/release after it.
	Admission []string `json:"admission,omitempty"`
}

// ServerInfo identifies the runtime.
type ServerInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// InitializeResult is the result of initialize.
type InitializeResult struct {
	ServerInfo ServerInfo `json:"serverInfo"`
}

// PromptParams are the params of session/prompt.
type PromptParams struct {
	SessionID     string          `json:"sessionId"`
	ContentBlocks []session.Block `json:"contentBlocks"`
}

// PromptResult is the result of session/prompt: the id of the queued user message.
type PromptResult struct {
	MessageID string `json:"messageId"`
}

// SessionEventParams are the params of session.event. Event stays raw on the client side so a
// malformed envelope is a protocol error of the run, not of the transport.
type SessionEventParams struct {
	SessionID string          `json:"sessionId"`
	Event     json.RawMessage `json:"event"`
}

// SessionStatusParams are the params of session.status.
type SessionStatusParams struct {
	SessionID string `json:"sessionId"`
	Status    string `json:"status"`
}

// SubagentStartedParams are the params of subagent.started.
type SubagentStartedParams struct {
	ParentSessionID string `json:"parentSessionId"`
	ChildSessionID  string `json:"childSessionId"`
}

// SubagentFinishedParams are the params of subagent.finished.
type SubagentFinishedParams struct {
	ParentSessionID string `json:"parentSessionId"`
	ChildSessionID  string `json:"childSessionId"`
	StopReason      string `json:"stopReason"`
}

// SubagentRunParams are the params of subagent/run: the delegation the runtime's subagent
// tool built for call CallID of session ParentSessionID. Request.Parent names the runtime's
// session, which the client does not know: the client places the run in its own tree.
type SubagentRunParams struct {
	ParentSessionID string           `json:"parentSessionId"`
	CallID          string           `json:"callId"`
	Provider        string           `json:"provider"`
	Request         subagent.Request `json:"request"`
}

// SubagentRunResult is the result of subagent/run. A rejected delegation is an error
// response whose message is the exact contract message.
type SubagentRunResult struct {
	Result subagent.Result `json:"result"`
}

// ModelAdmitParams are the params of model/admit: the provider a model request goes to.
type ModelAdmitParams struct {
	Provider string `json:"provider"`
}

// ModelAdmitResult is the result of model/admit: the permit the request holds until
// model/release.
type ModelAdmitResult struct {
	Permit string `json:"permit"`
}

// ModelReleaseParams are the params of model/release; its result is an empty object.
type ModelReleaseParams struct {
	Permit string `json:"permit"`
}
