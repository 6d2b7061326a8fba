package session

import (
	"encoding/json"
	"fmt"
	"time"
)

// Event types of contract R-11.
const (
	TypeEndSeed          = "session/end-seed"
	TypeSandboxMode      = "sandbox/mode"
	TypeApprovalPolicy   = "approval/policy"
	TypeInboxSpliced     = "agent/inbox/spliced"
	TypeTurnStart        = "turn/start"
	TypeStepStart        = "step/start"
	TypeAssistantChunk   = "assistant/chunk"
	TypeAssistantMessage = "assistant/message"
	TypeToolResult       = "tool/result"
	TypeStepEnd          = "step/end"
	TypeTurnEnd          = "turn/end"
	TypeSubagentDescr    = "subagent/descriptor"
	TypeSubagentStart    = "subagent/start"
	TypeSubagentEnd      = "subagent/end"
)

// Event is one entry of a session log. Seq is dense from 0 within a session; Data is the
// type's payload (one of the *Data structs below for the types this package defines).
type Event struct {
	Type string          `json:"type"`
	Seq  int64           `json:"seq"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data"`
}

// NewEvent marshals data into an event of the given type. Seq is left for the appender.
func NewEvent(typ string, data any) (Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("session: encode %s event: %w", typ, err)
	}
	return Event{Type: typ, Time: time.Now().UTC(), Data: raw}, nil
}

// Decode unmarshals the event's data into v.
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("session: decode %s event seq %d: %w", e.Type, e.Seq, err)
	}
	return nil
}

// Block types.
const (
	BlockText     = "text"
	BlockToolCall = "tool-call"
)

// Block is one content block: {type: "text", text} or {type: "tool-call", id, name, input}.
type Block struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// MarshalJSON writes a text block's text even when empty, and only the fields of its type.
func (b Block) MarshalJSON() ([]byte, error) {
	switch b.Type {
	case BlockText:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text})
	case BlockToolCall:
		input := b.Input
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		return json.Marshal(struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{b.Type, b.ID, b.Name, input})
	}
	type plain Block
	return json.Marshal(plain(b))
}

// Text returns a single text block.
func Text(s string) Block { return Block{Type: BlockText, Text: s} }

// JoinText concatenates the text of every text block.
func JoinText(blocks []Block) string {
	var n int
	for _, b := range blocks {
		n += len(b.Text)
	}
	buf := make([]byte, 0, n)
	for _, b := range blocks {
		if b.Type == BlockText {
			buf = append(buf, b.Text...)
		}
	}
	return string(buf)
}

// UserMessage is a message queued for an agent. Source says how it arrived ("followup").
type UserMessage struct {
	ID      string  `json:"id"`
	Role    string  `json:"role"` // always "user"
	Content []Block `json:"content"`
	Source  string  `json:"source,omitempty"`
}

// AssistantMessage is one model answer. Source names the route that produced it.
type AssistantMessage struct {
	ID      string  `json:"id"`
	Role    string  `json:"role"` // always "assistant"
	Content []Block `json:"content"`
	Source  string  `json:"source,omitempty"`
}

// Usage counts tokens of one model request.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// Chunk is a streamed piece of an assistant message.
type Chunk struct {
	Type  string `json:"type"` // "text-delta"
	Index int    `json:"index"`
	Text  string `json:"text"`
}

// ChunkTextDelta is the only chunk type.
const ChunkTextDelta = "text-delta"

// Turn end reason kinds (contract R-11).
const (
	EndCompleted   = "completed"
	EndAborted     = "aborted"
	EndBlocked     = "blocked"
	EndError       = "error"
	EndMaxTokens   = "max-tokens"
	EndInterrupted = "interrupted"
)

// Abort causes.
const (
	CauseUser     = "user"
	CauseParent   = "parent"
	CauseDisposed = "disposed"
)

// EndReason says why a turn ended. Cause is set for aborted, Message for error.
type EndReason struct {
	Kind    string `json:"kind"`
	Cause   string `json:"cause,omitempty"`
	Message string `json:"message,omitempty"`
}

// Payloads of the event types.
type (
	EndSeedData     struct{}
	SandboxModeData struct {
		Mode   string `json:"mode"`
		Source string `json:"source"`
	}
	ApprovalPolicyData struct {
		Policy string `json:"policy"`
		Source string `json:"source"`
	}
	InboxSplicedData struct {
		Target   string        `json:"target"`
		Start    int64         `json:"start"`
		Inserted []UserMessage `json:"inserted"`
	}
	TurnStartData struct {
		Turn int `json:"turn"`
	}
	StepData struct {
		Turn int `json:"turn"`
		Step int `json:"step"`
	}
	AssistantChunkData struct {
		Turn  int   `json:"turn"`
		Step  int   `json:"step"`
		Chunk Chunk `json:"chunk"`
	}
	AssistantMessageData struct {
		Turn    int              `json:"turn"`
		Step    int              `json:"step"`
		Message AssistantMessage `json:"message"`
		Usage   *Usage           `json:"usage,omitempty"`
	}
	ToolResultData struct {
		Turn    int     `json:"turn"`
		Step    int     `json:"step"`
		CallID  string  `json:"callId"`
		Name    string  `json:"name"`
		IsError bool    `json:"isError"`
		Content []Block `json:"content"`
	}
	TurnEndData struct {
		Turn   int       `json:"turn"`
		Reason EndReason `json:"reason"`
	}
)
