// Package model holds the streaming Model interface agents talk to, the registry of model
// providers, and the adapters: deepseek-official and openai-compatible (OpenAI-compatible chat
// completions through github.com/openai/openai-go/v3) and scripted (deterministic, offline).
package model

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/subflow-dev/subflow/harness/session"
)

// Roles of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of the conversation sent to a model. Assistant messages carry text and
// tool-call blocks; tool messages answer the call ToolCallID.
type Message struct {
	Role       string
	Content    []session.Block
	ToolCallID string
	IsError    bool
}

// ToolSchema describes a tool the model may call. Parameters is a JSON schema object.
type ToolSchema struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Request is one model request.
type Request struct {
	// SessionID identifies the asking session; stateful adapters (scripted) key on it.
	SessionID string
	// Cwd is the session's working directory (the scripted model resolves its script here).
	Cwd       string
	Model     string
	System    string
	Messages  []Message
	Tools     []ToolSchema
	MaxTokens int64 // 0: no cap
}

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool-calls"
)

// ToolCall is a tool call the model asked for. Input is a JSON object.
type ToolCall struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// Response is a complete model answer. Text is the whole text, also when it was streamed.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	Finish    string
	Usage     session.Usage
}

// Model answers requests, streaming text through onText as it arrives. Implementations honour
// ctx cancellation: on cancel they return ctx.Err() (wrapped or not) promptly; text already
// passed to onText stays the caller's to keep.
type Model interface {
	Stream(ctx context.Context, req Request, onText func(delta string)) (Response, error)
}

// Registry maps provider names to models. The zero value is empty and ready to use.
type Registry struct {
	mu     sync.RWMutex
	models map[string]Model
}

// Register adds or replaces the model for a provider name.
func (r *Registry) Register(provider string, m Model) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.models == nil {
		r.models = make(map[string]Model)
	}
	r.models[provider] = m
}

// Lookup returns the provider's model, or an error naming the provider.
func (r *Registry) Lookup(provider string) (Model, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if m, ok := r.models[provider]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("no adapter registered for provider %q", provider)
}

// Providers returns the registered provider names, sorted.
func (r *Registry) Providers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.models))
}

// String lists the providers, for diagnostics.
func (r *Registry) String() string { return strings.Join(r.Providers(), ", ") }
