package subagent

import (
	"bytes"
	"encoding/json"

	"github.com/subflow-dev/subflow/harness/session"
)

// Request asks a provider for one delegation (contract R-1). Cancellation travels in the
// context.Context of Provider.Start and Run.Result, never in the request.
type Request struct {
	// Label is an optional short display label.
	Label string `json:"label,omitempty"`
	// Prompt is delivered as the child's user message.
	Prompt []session.Block `json:"prompt"`
	// Parent says where the delegating session is.
	Parent ParentRef `json:"parent,omitzero"`
	// AgentOptions overrides the child's route field by field; zero fields inherit.
	AgentOptions session.Route `json:"agentOptions,omitzero"`
	// OutputSchema asks for a structured result matching this JSON schema. Nil, empty or
	// JSON null means none.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// MaxDepth caps the child's delegation depth; nil means no cap.
	MaxDepth *int64 `json:"maxDepth,omitempty"`
	// ToolFilter restricts the child's tools; nil means no restriction.
	ToolFilter *ToolFilter `json:"toolFilter,omitempty"`
	// Persona replaces the child's persona prompt section; "" means none.
	Persona string `json:"persona,omitempty"`
}

// Delegation is what a caller asks of one delegation, in the terms the subagent tool's
// arguments, a batch line and `starter run`'s flags share (task, label, route overrides,
// maxDepth, outputSchema, persona, allow, deny). Its Request method is the one place they
// become a Request.
type Delegation struct {
	Task         string
	Label        string
	Persona      string
	Route        session.Route
	MaxDepth     *int64
	OutputSchema json.RawMessage
	Allow, Deny  []string
}

// Request returns the request of d from parent: the task is the prompt's one text block,
// Route the AgentOptions, and the tool filter is set only when Allow or Deny is given (a nil
// filter leaves the child's tools alone). It checks nothing: CheckRequest does.
func (d Delegation) Request(parent ParentRef) Request {
	r := Request{
		Label:        d.Label,
		Prompt:       []session.Block{session.Text(d.Task)},
		Parent:       parent,
		AgentOptions: d.Route,
		OutputSchema: d.OutputSchema,
		MaxDepth:     d.MaxDepth,
		Persona:      d.Persona,
	}
	if len(d.Allow) > 0 || len(d.Deny) > 0 {
		r.ToolFilter = &ToolFilter{Allow: d.Allow, Deny: d.Deny}
	}
	return r
}

// HasOutputSchema reports whether the request asks for structured output.
func (r Request) HasOutputSchema() bool {
	s := bytes.TrimSpace(r.OutputSchema)
	return len(s) > 0 && !bytes.Equal(s, []byte("null"))
}

// ParentRef is what a provider needs to find the delegating parent.
type ParentRef struct {
	SessionID string `json:"sessionId,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
}

// ToolFilter restricts a child's tools by name.
type ToolFilter struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// StopReason says how a run ended (contract R-2).
type StopReason string

// Stop reasons.
const (
	StopCompleted StopReason = "completed"
	StopAborted   StopReason = "aborted"
	StopError     StopReason = "error"
	StopMaxTokens StopReason = "max-tokens"
	StopRefusal   StopReason = "refusal"
)

// Result is the outcome of a run (contract R-2). Child-level failures are results with a stop
// reason, never Go errors.
type Result struct {
	Output     []session.Block `json:"output"`
	Structured json.RawMessage `json:"structured,omitempty"`
	StopReason StopReason      `json:"stopReason"`
}

// MarshalJSON writes a nil Output as [] so every encoded result has an output array.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	if r.Output == nil {
		r.Output = []session.Block{}
	}
	return json.Marshal(plain(r))
}

// Capability names, as they appear in messages and in Capabilities' JSON.
const (
	CapOutputSchema = "outputSchema"
	CapDepthLimit   = "depthLimit"
	CapToolFilter   = "toolFilter"
	CapPersona      = "persona"
)

// Capabilities says which optional request fields a provider honours (contract R-3).
// InheritsParentContext is descriptive only: no request asks for it.
type Capabilities struct {
	OutputSchema          bool `json:"outputSchema"`
	DepthLimit            bool `json:"depthLimit"`
	ToolFilter            bool `json:"toolFilter"`
	Persona               bool `json:"persona"`
	InheritsParentContext bool `json:"inheritsParentContext"`
}
