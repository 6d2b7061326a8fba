package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/subagent"
)

// Name is the name of the subagent tool a model delegates through.
const Name = "subagent"

// Description is the subagent tool's description, as the model reads it.
const Description = "Delegate a self-contained task to a subagent: a fresh agent with its own " +
	"conversation, working in the same directory with the same kind of tools. Use it for work " +
	"that can be described completely in one message and whose answer you can use as is. The " +
	"subagent sees only `task` (not this conversation), so include every fact, path and " +
	"constraint it needs. The tool returns the subagent's final answer, or why it did not finish."

// DelegationDisabled is the tool's error message, without `Error: `, when its maxDepth is 0.
const DelegationDisabled = "subagent delegation is disabled here (maxDepth 0)"

// toolParameters is the JSON schema of the subagent tool's arguments.
const toolParameters = `{
  "type": "object",
  "properties": {
    "task": {"type": "string", "description": "The complete task for the subagent: it sees nothing else of this conversation."},
    "label": {"type": "string", "description": "A short display label for the run, a few words."},
    "provider": {"type": "string", "description": "The subagent provider, e.g. spawn (a fresh agent), fork (one that starts from this conversation's completed turns) or sdk (a separate agent process); default: the configured one."},
    "model": {"type": "string", "description": "The model of the subagent; default: yours."},
    "modelProvider": {"type": "string", "description": "The model provider of the subagent; default: yours."},
    "maxTokens": {"type": "integer", "description": "The subagent's output token cap per model request; default: yours."},
    "maxDepth": {"type": "integer", "description": "A lower delegation depth cap for this run than the configured one; it cannot raise it."},
    "outputSchema": {"type": "object", "description": "A JSON schema (object-rooted) the subagent's result must match; it is returned as JSON."},
    "persona": {"type": "string", "description": "A persona for the subagent, replacing its default one."},
    "allow": {"type": "array", "items": {"type": "string"}, "description": "Only these tools for the subagent."},
    "deny": {"type": "array", "items": {"type": "string"}, "description": "Tools the subagent must not have."}
  },
  "required": ["task"],
  "additionalProperties": false
}`

// ErrDeferred, returned by ToolOptions.Delegate (or wrapped), defers the call: the tool
// answers with a deferred result (tools.Result.Deferred), so the agent leaves the call
// unanswered and its turn pending, and whoever runs the delegation stores its result later
// as ToolResult renders it.
var ErrDeferred = errors.New("subagent: delegation deferred")

// nestedNamespace seeds the child ids of nested runs (see NestedChildID).
var nestedNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/subflow-dev/subflow/nested"))

// NestedChildID returns the child id of the run that subagent tool call callID of session
// sessionID delegates to. It is a UUID (version 5) that depends on nothing else, so the same
// call, run again after a crash, names the same child.
func NestedChildID(sessionID, callID string) string {
	return uuid.NewSHA1(nestedNamespace, []byte(sessionID+"\x00"+callID)).String()
}

// DelegateCall is one delegation the subagent tool asks for.
type DelegateCall struct {
	// CallID is the id of the tool call. With Parent.SessionID it names the delegation: a
	// call that runs again (its session resumed after a crash) has the same pair, so a
	// Delegate that must not start a run twice keys on it.
	CallID string
	// Provider is the subagent provider chosen for the call.
	Provider string
	// Request is the delegation; Request.Parent is the calling session.
	Request subagent.Request
}

// Options configure New.
type Options struct {
	// DefaultProvider is the provider of calls that name none. Required.
	DefaultProvider string
	// MaxDepth is the depth cap sent with every request (contract R-9); the zero value is
	// subagent.DefaultMaxDepth.
	MaxDepth subagent.MaxDepthSetting
	// Capabilities returns a provider's capabilities, false when the name is unknown.
	// Required.
	Capabilities func(provider string) (subagent.Capabilities, bool)
	// Delegate runs one delegation and waits for its result. A Go error is shown to the
	// model as `Error: <err>`: a rejection must carry the exact contract message (a
	// *subagent.ValidationError does). Required.
	Delegate func(ctx context.Context, call DelegateCall) (subagent.Result, error)
}

// New returns the subagent tool (contract ). It rejects options whose numeric
// MaxDepth the default provider cannot enforce (subagent.MaxDepthSetting.CheckProvider) and an
// unknown default provider.
//
// A call builds a subagent.Request (the task as the prompt, the calling session as the parent, the
// cap as MaxDepth), hands it to Delegate and renders the result: a completed run as its
// output text, followed by its structured value as JSON when it has one; any other run by
// subagent.RenderResult, as an error result. With a MaxDepth of 0 no call delegates: each gets
// `Error: ` + DelegationDisabled.
func New(opts Options) (tools.Tool, error) {
	if opts.DefaultProvider == "" || opts.Capabilities == nil || opts.Delegate == nil {
		return tools.Tool{}, errors.New("subagent: new tool: DefaultProvider, Capabilities and Delegate are required")
	}
	caps, ok := opts.Capabilities(opts.DefaultProvider)
	if !ok {
		return tools.Tool{}, fmt.Errorf("subagent: new tool: no subagent provider registered for %q", opts.DefaultProvider)
	}
	if err := opts.MaxDepth.CheckProvider(opts.DefaultProvider, caps); err != nil {
		return tools.Tool{}, fmt.Errorf("subagent: new tool: %w", err)
	}
	h := &toolHandler{opts: opts}
	return tools.Tool{
		Name:        Name,
		Description: Description,
		Parameters:  json.RawMessage(toolParameters),
		Handler:     h.handle,
	}, nil
}

// toolInput is the subagent tool's arguments.
type toolInput struct {
	Task          string          `json:"task"`
	Label         string          `json:"label"`
	Provider      string          `json:"provider"`
	Model         string          `json:"model"`
	ModelProvider string          `json:"modelProvider"`
	MaxTokens     int64           `json:"maxTokens"`
	MaxDepth      *int64          `json:"maxDepth"`
	OutputSchema  json.RawMessage `json:"outputSchema"`
	Persona       string          `json:"persona"`
	Allow         []string        `json:"allow"`
	Deny          []string        `json:"deny"`
}

type toolHandler struct {
	opts Options
}

func (h *toolHandler) handle(ctx context.Context, env tools.Env, call tools.Call) (tools.Result, error) {
	var in toolInput
	dec := json.NewDecoder(bytes.NewReader(call.Input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return tools.Result{}, fmt.Errorf("invalid arguments: %s: %v", call.Name, err)
	}
	if in.Task == "" {
		return tools.Result{}, fmt.Errorf("invalid arguments: %s: task must be a non-empty string", call.Name)
	}
	if in.MaxTokens < 0 {
		return tools.Result{}, fmt.Errorf("invalid arguments: %s: maxTokens must be positive", call.Name)
	}
	provider := in.Provider
	if provider == "" {
		provider = h.opts.DefaultProvider
	}
	maxDepth, err := h.maxDepth(provider, in.MaxDepth)
	if err != nil {
		return tools.Result{}, err
	}
	req := subagent.Delegation{
		Task:         in.Task,
		Label:        in.Label,
		Persona:      in.Persona,
		Route:        session.Route{Provider: in.ModelProvider, Model: in.Model, MaxTokens: in.MaxTokens},
		MaxDepth:     maxDepth,
		OutputSchema: in.OutputSchema,
		Allow:        in.Allow,
		Deny:         in.Deny,
	}.Request(subagent.ParentRef{SessionID: env.SessionID, Cwd: env.Cwd})
	res, err := h.opts.Delegate(ctx, DelegateCall{CallID: call.ID, Provider: provider, Request: req})
	if errors.Is(err, ErrDeferred) {
		return tools.Result{Deferred: true}, nil
	}
	return ToolResult(res, err), nil
}

// ToolResult is the subagent tool's result for a delegation that ended with res, or failed
// with err (a rejection, whose message is then the exact contract message): what the tool returns
// itself, and what a caller that ran a deferred delegation stores as the call's result.
func ToolResult(res subagent.Result, err error) tools.Result {
	if err != nil {
		return tools.ErrorResult(err.Error())
	}
	return renderToolResult(res)
}

// maxDepth returns the cap to send for a call to provider: the configured one, lowered by
// the call's own when it asks for less. A provider-managed setting sends the call's cap
// alone, if any: the provider then has to honour depthLimit like for any request.
func (h *toolHandler) maxDepth(provider string, asked *int64) (*int64, error) {
	setting := h.opts.MaxDepth
	if limit, ok := setting.Limit(); ok && limit == 0 {
		return nil, errors.New(DelegationDisabled)
	}
	if provider != h.opts.DefaultProvider {
		// Unknown providers are left to Delegate, whose start checks name them exactly.
		if caps, ok := h.opts.Capabilities(provider); ok {
			if err := setting.CheckProvider(provider, caps); err != nil {
				return nil, err
			}
		}
	}
	limit := setting.MaxDepth()
	if asked != nil && (limit == nil || *asked < *limit) {
		limit = asked
	}
	return limit, nil
}

// renderToolResult is the tool result of a finished run: completed runs give their output
// (and structured value), others the R-8 rendering as an error result.
func renderToolResult(res subagent.Result) tools.Result {
	if res.StopReason != subagent.StopCompleted {
		return tools.Result{Content: []session.Block{session.Text(subagent.RenderResult(res))}, IsError: true}
	}
	text := subagent.RenderResult(res)
	if s := bytes.TrimSpace(res.Structured); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		if text != "" {
			text += "\n\n"
		}
		text += "Structured result:\n" + string(s)
	}
	return tools.TextResult(text)
}
