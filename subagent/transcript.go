package subagent

import (
	"time"

	"github.com/subflow-dev/subflow/harness/session"
)

// DefaultTranscriptCut is the bound, in bytes, of each text, tool input and tool result of a
// transcript that is not read in full.
const DefaultTranscriptCut = 2000

// Kinds of TranscriptEntry.
const (
	EntryPrompt     = "prompt"      // the user message the turn answers
	EntryStep       = "step"        // a model step started
	EntryText       = "text"        // the assistant's text of a step
	EntryToolCall   = "tool-call"   // a tool call the assistant asked for
	EntryToolResult = "tool-result" // a tool call's result
	EntryTurnEnd    = "turn-end"    // the turn ended
)

// Transcript is a child's turn in order, as `starter transcript` prints it: its prompt, each
// step's text and tool calls with their inputs and results, and how the turn ended.
type Transcript struct {
	SessionID string            `json:"sessionId"`
	Entries   []TranscriptEntry `json:"entries"`
	// Cut is the bound each text, input and result was cut at; 0 when read in full.
	Cut          int   `json:"cut,omitempty"`
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// TranscriptEntry is one entry of a Transcript; its fields are those of its Kind.
type TranscriptEntry struct {
	Kind string    `json:"kind"`
	Time time.Time `json:"time,omitzero"`
	Step int       `json:"step,omitempty"`
	// Text is a prompt's or the assistant's text, a tool result's content, or a failed
	// turn's message.
	Text string `json:"text,omitempty"`
	// Tool, CallID and Input are a tool call's (Tool and CallID also its result's).
	Tool    string `json:"tool,omitempty"`
	CallID  string `json:"callId,omitempty"`
	Input   string `json:"input,omitempty"`
	IsError bool   `json:"isError,omitempty"`
	// InputTokens and OutputTokens are a step's, on its text entry.
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// End is a turn-end's reason kind (completed, aborted, error, max-tokens, …) and Cause
	// an abort's cause.
	End   string `json:"end,omitempty"`
	Cause string `json:"cause,omitempty"`
	// CutBytes is how many bytes of Text or Input were left out.
	CutBytes int `json:"cutBytes,omitempty"`
}

// BuildTranscript returns the transcript of a child's own events (never a fork's seed),
// each text, input and result cut at cut bytes, or whole when cut is 0. Malformed events are
// skipped.
func BuildTranscript(sessionID string, events []session.Event, cut int) Transcript {
	tr := Transcript{SessionID: sessionID, Cut: cut, Entries: []TranscriptEntry{}}
	clip := func(e *TranscriptEntry, s string) string {
		if cut <= 0 || len(s) <= cut {
			return s
		}
		h := Head(s, cut)
		e.CutBytes += len(s) - len(h) + len("…")
		return h
	}
	for _, ev := range events {
		e := TranscriptEntry{Time: ev.Time}
		switch ev.Type {
		case session.TypeInboxSpliced:
			var d session.InboxSplicedData
			if ev.Decode(&d) != nil {
				continue
			}
			for _, m := range d.Inserted {
				p := TranscriptEntry{Kind: EntryPrompt, Time: ev.Time}
				p.Text = clip(&p, session.JoinText(m.Content))
				tr.Entries = append(tr.Entries, p)
			}
			continue
		case session.TypeStepStart:
			var d session.StepData
			if ev.Decode(&d) != nil {
				continue
			}
			e.Kind, e.Step = EntryStep, d.Step
		case session.TypeAssistantMessage:
			var d session.AssistantMessageData
			if ev.Decode(&d) != nil {
				continue
			}
			e.Kind, e.Step = EntryText, d.Step
			e.Text = clip(&e, session.JoinText(d.Message.Content))
			if d.Usage != nil {
				e.InputTokens, e.OutputTokens = d.Usage.InputTokens, d.Usage.OutputTokens
				tr.InputTokens += d.Usage.InputTokens
				tr.OutputTokens += d.Usage.OutputTokens
			}
			tr.Entries = append(tr.Entries, e)
			for _, b := range d.Message.Content {
				if b.Type != session.BlockToolCall {
					continue
				}
				c := TranscriptEntry{Kind: EntryToolCall, Time: ev.Time, Step: d.Step, Tool: b.Name, CallID: b.ID}
				c.Input = clip(&c, string(b.Input))
				tr.Entries = append(tr.Entries, c)
			}
			continue
		case session.TypeToolResult:
			var d session.ToolResultData
			if ev.Decode(&d) != nil {
				continue
			}
			e.Kind, e.Step, e.Tool, e.CallID, e.IsError = EntryToolResult, d.Step, d.Name, d.CallID, d.IsError
			e.Text = clip(&e, session.JoinText(d.Content))
		case session.TypeTurnEnd:
			var d session.TurnEndData
			if ev.Decode(&d) != nil {
				continue
			}
			e.Kind, e.End, e.Cause = EntryTurnEnd, d.Reason.Kind, d.Reason.Cause
			e.Text = clip(&e, d.Reason.Message)
		default:
			continue
		}
		tr.Entries = append(tr.Entries, e)
	}
	return tr
}
