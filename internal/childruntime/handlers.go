package childruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/session/filestore"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/internal/telemetry"
	"github.com/subflow-dev/subflow/internal/wire"
	"github.com/subflow-dev/subflow/subagent"
)

// User-visible error messages of the protocol (contract ).
const (
	msgBadMaxTokens     = "initialize maxTokens must be a positive safe integer"
	msgBadMaxDepth      = "initialize maxDepth must be a non-negative safe integer"
	msgShuttingDown     = "SDK server is shutting down"
	msgNotInitialized   = "session/prompt before initialize: send initialize first"
	msgInitializedTwice = "initialize: the runtime is already initialized"
)

// initialize fixes the runtime's cwd, route and delegated policy (sandbox mode, remaining
// depth) and opens its session store in the runtime's own session root.
func (s *server) initialize(_ context.Context, raw json.RawMessage) (any, error) {
	var p wire.InitializeParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	route := session.Route{Provider: p.Provider, Model: p.Model}
	if p.MaxTokens != nil {
		n, ok := positiveSafeInteger(p.MaxTokens)
		if !ok {
			return nil, errors.New(msgBadMaxTokens)
		}
		route.MaxTokens = n
	}
	if err := tools.CheckSandboxMode(p.Sandbox); err != nil {
		return nil, fmt.Errorf("initialize sandbox: %w", err)
	}
	var maxDepth *int64
	if p.MaxDepth != nil {
		n, ok := safeInteger(p.MaxDepth, 0)
		if !ok {
			return nil, errors.New(msgBadMaxDepth)
		}
		maxDepth = &n
	}
	if _, err := s.models.Lookup(p.Provider); err != nil {
		// "no adapter registered for provider \"<p>\"", marked as the rejection it is, so the
		// worker refuses the run instead of failing it (docs/protocol.md).
		return nil, &wire.Error{Code: wire.CodeInternalError, Message: err.Error(), Data: wire.RuleData(subagent.RuleUnknownModel)}
	}
	if !filepath.IsAbs(p.Cwd) {
		return nil, fmt.Errorf("initialize cwd must be an absolute path: %q", p.Cwd)
	}
	for _, d := range slices.Concat(p.Protected, p.Roots, p.HardLinkRoots) {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("initialize protected, roots and hardLinkRoots must be absolute paths: %q", d)
		}
	}
	if fi, err := os.Stat(p.Cwd); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("initialize cwd is not an accessible directory: %q", p.Cwd)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.shuttingDown:
		return nil, errors.New(msgShuttingDown)
	case s.store != nil:
		return nil, errors.New(msgInitializedTwice)
	}
	if err := os.MkdirAll(s.sessionRoot, 0o700); err != nil {
		return nil, fmt.Errorf("initialize: open session store: %w", err)
	}
	store, err := filestore.New(s.sessionRoot)
	if err != nil {
		return nil, fmt.Errorf("initialize: open session store: %w", err)
	}
	s.store, s.cwd, s.route, s.sandbox, s.maxDepth = store, p.Cwd, &route, p.Sandbox, maxDepth
	s.protected = append([]string{s.sessionRoot}, p.Protected...)
	s.roots, s.hardLinkRoots = p.Roots, p.HardLinkRoots
	s.traceParent = p.TraceParent
	s.models = s.admitted(p.Admission)
	return wire.InitializeResult{ServerInfo: wire.ServerInfo{Name: wire.ServerName, Version: s.version}}, nil
}

// prompt queues a user message on the session, opening (and if need be creating) it first,
// and returns the message id at once. The receipt is the session's agent/inbox/spliced event.
func (s *server) prompt(ctx context.Context, raw json.RawMessage) (any, error) {
	var p wire.PromptParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, fmt.Errorf("session/prompt: %w", err)
	}
	if p.SessionID == "" {
		return nil, errors.New("session/prompt: sessionId is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.shuttingDown:
		return nil, errors.New(msgShuttingDown)
	case s.store == nil:
		return nil, errors.New(msgNotInitialized)
	}
	st, err := s.sessionLocked(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	st.queue()
	// The turn's spans join the delegating run's trace (initialize's traceparent).
	id, err := st.agent.Followup(telemetry.WithTraceParent(ctx, s.traceParent), p.ContentBlocks)
	if err != nil {
		st.unqueue()
		return nil, fmt.Errorf("session/prompt %s: %w", p.SessionID, err)
	}
	return wire.PromptResult{MessageID: id}, nil
}

// sessionLocked returns the open session id, opening it on first use: a session absent from
// the store is created with the initialize cwd and route and the default preset. The caller
// holds s.mu.
func (s *server) sessionLocked(ctx context.Context, id string) (*sessionState, error) {
	if st, ok := s.sessions[id]; ok {
		return st, nil
	}
	_, _, err := s.store.Load(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		err = s.createSession(ctx, id)
	}
	if err != nil {
		return nil, fmt.Errorf("session/prompt %s: %w", id, err)
	}
	a, err := agent.Open(ctx, agent.Options{
		Store: s.store, SessionID: id, Models: s.models, Tools: s.tools, Preset: s.preset,
		Logger: s.log, Protected: s.protected, Roots: s.roots, HardLinkRoots: s.hardLinkRoots,
	})
	if err != nil {
		return nil, fmt.Errorf("session/prompt %s: %w", id, err)
	}
	tool, err := s.subagentTool(id)
	if err == nil {
		_, err = a.Scope().Register(tool)
	}
	if err != nil {
		_ = a.Close(ctx)
		return nil, fmt.Errorf("session/prompt %s: %w", id, err)
	}
	st := newSessionState(id, a, s.out, s.log)
	s.sessions[id] = st
	return st, nil
}

// createSession creates a session with the initialize cwd, route and remaining depth (as the
// header's subtree cap, below depth 0) and the delegated policy: the parent's sandbox mode, and
// approval policy "never" — as an in-process child gets them (contract R-24). The caller holds
// s.mu.
func (s *server) createSession(ctx context.Context, id string) error {
	route := *s.route
	if err := s.store.Create(ctx, session.Header{
		ID: id, Cwd: s.cwd, Route: &route, AgentPreset: s.preset.Name, MaxDepth: s.maxDepth,
	}); err != nil {
		return err
	}
	if s.sandbox == "" {
		return nil
	}
	var setup []session.Event
	for _, e := range []struct {
		typ  string
		data any
	}{
		{session.TypeSandboxMode, session.SandboxModeData{Mode: s.sandbox, Source: sourceDelegation}},
		{session.TypeApprovalPolicy, session.ApprovalPolicyData{Policy: tools.ApprovalNever, Source: sourceDelegation}},
	} {
		ev, err := session.NewEvent(e.typ, e.data)
		if err != nil {
			return err
		}
		setup = append(setup, ev)
	}
	return s.store.Append(ctx, id, session.Renumber(setup, 0)...)
}

// sourceDelegation marks the policy events a session gets from the delegating parent.
const sourceDelegation = "delegation"

// shutdown only acknowledges: serve starts the disposal once the reply is written.
func (s *server) shutdown(context.Context, json.RawMessage) (any, error) {
	s.mu.Lock()
	s.shuttingDown = true
	s.mu.Unlock()
	return struct{}{}, nil
}

// decodeParams decodes params into v; absent params decode as {}.
func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("invalid params: %w", err)
	}
	return nil
}

// positiveSafeInteger reports the value of a JSON number that is an integer in [1, 2^53−1].
// Like JavaScript, 1.0 and 1e3 count as integers; strings, null and 2^53 do not.
func positiveSafeInteger(raw json.RawMessage) (int64, bool) { return safeInteger(raw, 1) }

// safeInteger reports the value of a JSON number that is an integer in [min, 2^53−1].
func safeInteger(raw json.RawMessage, min float64) (int64, bool) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil || !bytes.Equal(bytes.TrimSpace(raw), []byte(n)) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f < min || !session.IsSafeInteger(f) {
		return 0, false
	}
	return int64(f), true
}
