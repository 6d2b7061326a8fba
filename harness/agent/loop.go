package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
	"github.com/subflow-dev/subflow/internal/telemetry"
)

// NoRouteMessage is the turn/end error message of a session whose header has no route.
const NoRouteMessage = "no model route configured for this session: set a provider and a model"

// storeCtx is the context of log writes. They must outlive a cancelled turn, whose partial
// output and turn/end still have to be written.
var storeCtx = context.Background()

// newTurn splices msgs into the conversation and runs a turn answering them.
func (a *Agent) newTurn(ctx context.Context, msgs []session.UserMessage) {
	a.logMu.Lock()
	err := a.emitLocked(session.TypeInboxSpliced, session.InboxSplicedData{
		Target: a.header.ID, Start: int64(len(a.st.history)), Inserted: msgs,
	})
	if err == nil {
		a.st.spliced(msgs)
	}
	a.logMu.Unlock()
	if err != nil {
		a.writeFailure("splice failed", err)
		return
	}
	turn, err := a.startTurn()
	if err != nil {
		a.writeFailure("turn start failed", err)
		return
	}
	a.runSteps(ctx, turn, 1)
}

// startTurn appends turn/start with the next turn number.
func (a *Agent) startTurn() (int, error) {
	a.logMu.Lock()
	defer a.logMu.Unlock()
	turn := a.st.lastTurn + 1
	if err := a.emitLocked(session.TypeTurnStart, session.TurnStartData{Turn: turn}); err != nil {
		return 0, err
	}
	a.st.turnStarted(turn)
	return turn, nil
}

// resumeTurn continues the turn the log ends in (see Resume).
func (a *Agent) resumeTurn(ctx context.Context) {
	a.logMu.Lock()
	p := *a.st.pending
	a.logMu.Unlock()
	turn := p.turn
	if p.unstarted {
		var err error
		if turn, err = a.startTurn(); err != nil {
			a.writeFailure("turn start failed", err)
			return
		}
	}
	a.log.Info("resuming turn", zap.Int("turn", turn), zap.Int("step", p.step))
	if p.step > 0 && p.message != nil {
		calls := toolCalls(p.message)
		if !p.stepEnded {
			if _, ok := a.lookupModel(ctx, turn); !ok {
				return
			}
			if end := a.runTools(ctx, turn, p.step, calls, p.done); end != nil {
				a.endTurn(turn, *end)
				return
			}
			if end := a.endStep(turn, p.step, len(calls) > 0); end != nil {
				a.endTurn(turn, *end)
				return
			}
		} else if len(calls) == 0 {
			a.endTurn(turn, session.EndReason{Kind: session.EndCompleted})
			return
		}
	}
	a.runSteps(ctx, turn, p.step+1)
}

// lookupModel returns the model of the header's route; without one it ends the turn `error`.
func (a *Agent) lookupModel(ctx context.Context, turn int) (model.Model, bool) {
	r := a.header.Route
	if r == nil || r.IsZero() {
		a.endTurn(turn, session.EndReason{Kind: session.EndError, Message: NoRouteMessage})
		return nil, false
	}
	m, err := a.models.Lookup(r.Provider)
	if err != nil {
		a.endTurn(turn, session.EndReason{Kind: session.EndError, Message: err.Error()})
		return nil, false
	}
	return m, true
}

// runSteps runs steps from step on until the turn ends.
func (a *Agent) runSteps(ctx context.Context, turn, step int) {
	m, ok := a.lookupModel(ctx, turn)
	if !ok {
		return
	}
	for ; ; step++ {
		if step > a.stepLimit {
			a.endTurn(turn, session.EndReason{
				Kind:    session.EndError,
				Message: fmt.Sprintf("turn stopped at the step limit of %d steps without a final answer", a.stepLimit),
			})
			return
		}
		if end := a.step(ctx, m, turn, step); end != nil {
			a.endTurn(turn, *end)
			return
		}
	}
}

// step runs one step: the model request, then the tool calls it asked for. It returns how
// the turn ends, or nil when the turn goes on with another step.
func (a *Agent) step(ctx context.Context, m model.Model, turn, step int) *session.EndReason {
	a.takeConclude() // a request left over from an earlier step must not end this one
	sd := session.StepData{Turn: turn, Step: step}
	if err := a.emit(session.TypeStepStart, sd, func(s *state) { s.stepStarted(step) }); err != nil {
		return a.failed(err)
	}
	if end := a.runStepHooks(turn, step); end != nil {
		return end
	}
	if ctx.Err() != nil {
		return aborted(ctx)
	}

	req := a.request()
	index := 0
	var chunkErr error
	mctx, span := telemetry.StartModelRequest(ctx, telemetry.ModelRequest{
		Provider: a.header.Route.Provider, Model: req.Model, MaxTokens: req.MaxTokens, SessionID: a.header.ID,
	})
	// A chunk the store failed ends the step: the request is cancelled, so the model stops
	// producing an answer the log cannot hold, and knows it was not taken (the scripted
	// model gives its response back for the step's redo, docs/durability.md).
	mctx, cancelStream := context.WithCancel(mctx)
	defer cancelStream()
	// An answer the log could not hold is given back to the model likewise, so the redo of
	// the step takes it again (contract R-90).
	mctx, giveBack := model.WithGiveBack(mctx)
	resp, err := m.Stream(mctx, req, func(delta string) {
		if delta == "" || chunkErr != nil {
			return
		}
		chunkErr = a.emit(session.TypeAssistantChunk, session.AssistantChunkData{
			Turn: turn, Step: step,
			Chunk: session.Chunk{Type: session.ChunkTextDelta, Index: index, Text: delta},
		}, nil)
		if chunkErr != nil {
			cancelStream()
		}
		index++
	})
	telemetry.EndModelRequest(span, telemetry.ModelResponse{
		InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, Finish: resp.Finish,
	}, err)
	switch {
	case chunkErr != nil:
		giveBack()
		return a.failed(chunkErr)
	case err != nil && ctx.Err() != nil:
		return aborted(ctx)
	case err != nil && a.interrupt && model.IsRetryable(err):
		a.mu.Lock()
		a.interrupted = err
		a.mu.Unlock()
		return &session.EndReason{Kind: kindInterrupted}
	case err != nil:
		return &session.EndReason{Kind: session.EndError, Message: err.Error()}
	}

	msg := assistantMessage(resp, a.header.Route)
	usage := resp.Usage
	err = a.emit(session.TypeAssistantMessage, session.AssistantMessageData{
		Turn: turn, Step: step, Message: msg, Usage: &usage,
	}, func(s *state) {
		s.assistantMessage(msg)
		s.used(&usage)
	})
	if err != nil {
		giveBack()
		return a.failed(err)
	}
	if resp.Finish == model.FinishLength {
		if err := a.closeStep(turn, step); err != nil {
			return a.failed(err)
		}
		return &session.EndReason{Kind: session.EndMaxTokens}
	}
	calls := toolCalls(&msg)
	if end := a.runTools(ctx, turn, step, calls, nil); end != nil {
		return end
	}
	if a.overBudget() {
		// After the step's tools ran, so every call in the log has its result.
		if err := a.closeStep(turn, step); err != nil {
			return a.failed(err)
		}
		return &session.EndReason{Kind: session.EndMaxTokens}
	}
	return a.endStep(turn, step, len(calls) > 0)
}

// overBudget reports whether the turn's usage reached the route's token budget.
func (a *Agent) overBudget() bool {
	r := a.header.Route
	if r == nil || r.TokenBudget <= 0 {
		return false
	}
	a.logMu.Lock()
	defer a.logMu.Unlock()
	return a.st.pending != nil && a.st.pending.tokens >= r.TokenBudget
}

// runStepHooks appends the events of the OnStepStart hooks.
func (a *Agent) runStepHooks(turn, step int) *session.EndReason {
	a.hookMu.Lock()
	hooks := a.stepHooks
	a.hookMu.Unlock()
	for _, hook := range hooks {
		if events := hook(turn, step); len(events) > 0 {
			if err := a.emitRaw(events); err != nil {
				return a.failed(err)
			}
		}
	}
	return nil
}

// request builds the model request of the next step from the prompt and the history.
func (a *Agent) request() model.Request {
	system, contextMsg := a.prompt()
	visible := a.scope.Visible()
	schemas := make([]model.ToolSchema, len(visible))
	for i, t := range visible {
		schemas[i] = model.ToolSchema{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	a.logMu.Lock()
	msgs := make([]model.Message, 0, len(contextMsg)+len(a.st.history))
	msgs = append(msgs, contextMsg...)
	msgs = append(msgs, a.st.history...)
	a.logMu.Unlock()
	r := a.header.Route
	return model.Request{
		SessionID: a.header.ID,
		Cwd:       a.header.Cwd,
		Model:     r.Model,
		System:    system,
		Messages:  msgs,
		Tools:     schemas,
		MaxTokens: r.MaxTokens,
	}
}

// assistantMessage is the logged form of a model response: a text block when there is text,
// then the tool calls.
func assistantMessage(resp model.Response, r *session.Route) session.AssistantMessage {
	content := make([]session.Block, 0, 1+len(resp.ToolCalls))
	if resp.Text != "" {
		content = append(content, session.Text(resp.Text))
	}
	for _, c := range resp.ToolCalls {
		content = append(content, session.Block{Type: session.BlockToolCall, ID: c.ID, Name: c.Name, Input: c.Input})
	}
	return session.AssistantMessage{
		ID:      uuid.NewString(),
		Role:    model.RoleAssistant,
		Content: content,
		Source:  r.Provider + "/" + r.Model,
	}
}

// runTools executes calls in order through the scope, skipping those done already, and
// appends each result as it completes. done counts the stored results per call id: results
// are stored in call order, so the first done[id] calls with that id are the ones that ran,
// also when the model repeated an id. A cancel between calls ends the turn `aborted`. When a
// call was deferred (tools.Result.Deferred) the step's other calls still run, then the turn
// stops pending (kindDeferred).
func (a *Agent) runTools(ctx context.Context, turn, step int, calls []tools.Call, done map[string]int) *session.EndReason {
	skip := maps.Clone(done)
	deferred := 0
	for _, call := range calls {
		if skip[call.ID] > 0 {
			skip[call.ID]--
			continue
		}
		if ctx.Err() != nil {
			return aborted(ctx)
		}
		tctx, span := telemetry.StartToolCall(ctx, call.Name, call.ID)
		res := a.scope.Execute(tctx, a.env(), call)
		telemetry.EndToolCall(span, res.IsError, res.Deferred)
		if res.Deferred {
			deferred++
			continue
		}
		err := a.emit(session.TypeToolResult, session.ToolResultData{
			Turn: turn, Step: step, CallID: call.ID, Name: call.Name, IsError: res.IsError, Content: res.Content,
		}, func(s *state) { s.toolResult(call.ID, res) })
		if err != nil {
			return a.failed(err)
		}
	}
	if ctx.Err() != nil {
		return aborted(ctx)
	}
	if deferred > 0 {
		return &session.EndReason{Kind: kindDeferred}
	}
	return nil
}

// The end "reasons" of a turn that stops pending: endTurn writes no turn/end for them.
const (
	// kindDeferred: tool calls of the last step were deferred; endTurn syncs the log.
	kindDeferred = "deferred"
	// kindInterrupted: a retryable model failure under InterruptOnRetryable (Interruption
	// set); endTurn syncs the log so that another process can resume the turn.
	kindInterrupted = "interrupted-retryable"
	// kindUnwritten: the store failed a write of the turn (EndFailure set, see failed), or
	// the agent was suspended; the log holds what was written before.
	kindUnwritten = "unwritten"
)

// endStep appends step/end and syncs. The turn completes when the step ran no tool calls or a
// tool asked to conclude (ConcludeAfterStep).
func (a *Agent) endStep(turn, step int, ranTools bool) *session.EndReason {
	if err := a.closeStep(turn, step); err != nil {
		return a.failed(err)
	}
	if a.takeConclude() || !ranTools {
		return &session.EndReason{Kind: session.EndCompleted}
	}
	return nil
}

// closeStep appends step/end and syncs.
func (a *Agent) closeStep(turn, step int) error {
	if err := a.emit(session.TypeStepEnd, session.StepData{Turn: turn, Step: step}, (*state).stepEnded); err != nil {
		return err
	}
	return a.sync()
}

// endTurn appends turn/end and syncs. A failure leaves the turn pending in the log, to be
// resumed by the next process that opens the session (EndFailure). A turn that stops pending
// (kindDeferred, kindInterrupted, kindUnwritten) gets no turn/end.
func (a *Agent) endTurn(turn int, reason session.EndReason) {
	switch reason.Kind {
	case kindDeferred:
		if err := a.sync(); err != nil {
			a.writeFailure("sync before deferred tool calls failed", err)
			return
		}
		a.log.Debug("turn left pending: tool calls deferred", zap.Int("turn", turn))
		return
	case kindInterrupted:
		if err := a.sync(); err != nil {
			a.writeFailure("sync after interruption failed", err)
		}
		a.log.Warn("turn interrupted by a retryable model failure; it resumes on the next drive",
			zap.Int("turn", turn), zap.Error(a.Interruption()))
		return
	case kindUnwritten:
		a.log.Warn("turn left pending: a session write failed; it resumes on the next drive",
			zap.Int("turn", turn), zap.Error(a.EndFailure()))
		return
	}
	err := a.emit(session.TypeTurnEnd, session.TurnEndData{Turn: turn, Reason: reason}, (*state).turnEnded)
	if err == nil {
		err = a.sync()
	}
	if err != nil {
		a.writeFailure("turn end failed", err)
		return
	}
	a.log.Debug("turn ended", zap.Int("turn", turn), zap.String("kind", reason.Kind))
}

// writeFailure logs a failed log write and records the first one of the turn for EndFailure.
// A write refused because the agent was suspended is expected: it is only logged at debug
// level and not recorded.
func (a *Agent) writeFailure(msg string, err error) {
	if errors.Is(err, ErrSuspended) {
		a.log.Debug(msg+": agent suspended", zap.Error(err))
		return
	}
	a.log.Error(msg, zap.Error(err))
	a.mu.Lock()
	if a.endFailure == nil {
		a.endFailure = err
	}
	a.mu.Unlock()
}

// aborted is the end of a turn whose context was cancelled, with the cause given to Cancel.
func aborted(ctx context.Context) *session.EndReason {
	cause := session.CauseUser
	var ae *abortError
	if errors.As(context.Cause(ctx), &ae) {
		cause = ae.cause
	}
	return &session.EndReason{Kind: session.EndAborted, Cause: cause}
}

// failed is the end of a turn whose log write failed with err (the store was unreachable,
// or refused the write). Under InterruptOnRetryable the turn stops pending, with no turn/end:
// a store fault is the infrastructure's, not the turn's, and the driver's retry resumes the
// turn from the log (EndFailure). Without it the turn ends `error`, as no driver would resume
// it. A write refused because the agent was suspended always leaves the turn pending.
func (a *Agent) failed(err error) *session.EndReason {
	if errors.Is(err, ErrSuspended) {
		return &session.EndReason{Kind: kindUnwritten}
	}
	if a.interrupt {
		a.writeFailure("session write failed", err)
		return &session.EndReason{Kind: kindUnwritten}
	}
	return &session.EndReason{Kind: session.EndError, Message: err.Error()}
}
