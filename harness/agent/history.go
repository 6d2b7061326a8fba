package agent

import (
	"fmt"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
)

// notExecutedText answers, in the model's view of an ended turn, a tool call that never got a
// stored result (the turn was aborted or failed between the call and its result). Chat APIs
// reject an assistant tool call without an answer, so the next turn's request needs one; the
// log itself is left as it was.
const notExecutedText = "Error: tool call was not executed: the turn ended before it ran"

// state is what the session log says: rebuilt by replay in Open and kept current by every
// append, so a reopened agent and a live one agree. Guarded by Agent.logMu.
type state struct {
	nextSeq  int64
	lastTurn int // highest turn number in the log (the seed's included)
	history  []model.Message
	// openCalls are the calls of the latest assistant message still lacking a tool/result.
	openCalls []model.ToolCall
	sandbox   string
	approval  string
	pending   *pendingTurn // nil when the log does not end inside a turn
}

// pendingTurn is a turn the log has not ended: the running one, or one a crash cut short.
type pendingTurn struct {
	// unstarted: user messages were spliced but no turn/start followed.
	unstarted bool
	turn      int
	step      int // last started step, 0 before the first
	stepEnded bool
	// message is the last step's assistant message, nil when the step has none yet.
	message *session.AssistantMessage
	// done counts, per call id, the stored tool/results of the last step. A count, not a flag:
	// a model may repeat an id within one response, and each call is its own execution.
	done map[string]int
	// tokens is the turn's usage so far, input and output, for Route.TokenBudget.
	tokens int64
}

// replay rebuilds the state from a loaded log. Events before the header's seedLength (a fork
// seed) are history like any other.
func replay(events []session.Event) (*state, error) {
	s := &state{}
	for i := range events {
		ev := &events[i]
		if ev.Seq != int64(i) {
			return nil, fmt.Errorf("agent: replay: event %d has seq %d", i, ev.Seq)
		}
		if err := s.replayOne(ev); err != nil {
			return nil, err
		}
	}
	s.nextSeq = int64(len(events))
	return s, nil
}

func (s *state) replayOne(ev *session.Event) error {
	switch ev.Type {
	case session.TypeSandboxMode:
		var d session.SandboxModeData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		s.sandbox = d.Mode
	case session.TypeApprovalPolicy:
		var d session.ApprovalPolicyData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		s.approval = d.Policy
	case session.TypeInboxSpliced:
		var d session.InboxSplicedData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		s.spliced(d.Inserted)
	case session.TypeTurnStart:
		var d session.TurnStartData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		s.turnStarted(d.Turn)
	case session.TypeStepStart:
		var d session.StepData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		s.stepStarted(d.Step)
	case session.TypeAssistantMessage:
		var d session.AssistantMessageData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		s.assistantMessage(d.Message)
		s.used(d.Usage)
	case session.TypeToolResult:
		var d session.ToolResultData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		s.toolResult(d.CallID, tools.Result{Content: d.Content, IsError: d.IsError})
	case session.TypeStepEnd:
		s.stepEnded()
	case session.TypeTurnEnd:
		s.turnEnded()
	}
	return nil
}

func (s *state) spliced(msgs []session.UserMessage) {
	for _, m := range msgs {
		s.history = append(s.history, model.Message{Role: model.RoleUser, Content: m.Content})
	}
	if s.pending == nil {
		s.pending = &pendingTurn{unstarted: true}
	}
}

func (s *state) turnStarted(turn int) {
	s.lastTurn = max(s.lastTurn, turn)
	s.pending = &pendingTurn{turn: turn}
}

// used adds a model request's usage to the pending turn's.
func (s *state) used(u *session.Usage) {
	if s.pending != nil && u != nil {
		s.pending.tokens += u.InputTokens + u.OutputTokens
	}
}

func (s *state) stepStarted(step int) {
	if s.pending == nil {
		return
	}
	s.pending.step = step
	s.pending.stepEnded = false
	s.pending.message = nil
	s.pending.done = nil
}

func (s *state) assistantMessage(m session.AssistantMessage) {
	s.history = append(s.history, model.Message{Role: model.RoleAssistant, Content: m.Content})
	s.openCalls = s.openCalls[:0]
	for _, b := range m.Content {
		if b.Type == session.BlockToolCall {
			s.openCalls = append(s.openCalls, model.ToolCall{ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
	if s.pending != nil {
		s.pending.message = &m
	}
}

func (s *state) toolResult(callID string, r tools.Result) {
	s.history = append(s.history, model.Message{
		Role: model.RoleTool, Content: r.Content, ToolCallID: callID, IsError: r.IsError,
	})
	for i, c := range s.openCalls {
		if c.ID == callID {
			s.openCalls = append(s.openCalls[:i], s.openCalls[i+1:]...)
			break
		}
	}
	if s.pending != nil {
		if s.pending.done == nil {
			s.pending.done = make(map[string]int)
		}
		s.pending.done[callID]++
	}
}

func (s *state) stepEnded() {
	if s.pending != nil {
		s.pending.stepEnded = true
	}
}

func (s *state) turnEnded() {
	for _, c := range s.openCalls {
		s.history = append(s.history, model.Message{
			Role:       model.RoleTool,
			Content:    []session.Block{session.Text(notExecutedText)},
			ToolCallID: c.ID,
			IsError:    true,
		})
	}
	s.openCalls = s.openCalls[:0]
	s.pending = nil
}

// toolCalls returns the tool-call blocks of an assistant message as calls.
func toolCalls(m *session.AssistantMessage) []tools.Call {
	var calls []tools.Call
	for _, b := range m.Content {
		if b.Type == session.BlockToolCall {
			calls = append(calls, tools.Call{ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
	return calls
}
