package subagent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/subflow-dev/subflow/harness/session"
)

// MaxDigestBytes bounds a Digest's JSON encoding: a run's history then stays independent of
// its transcript, however many steps the child took.
const MaxDigestBytes = 8 << 10

// Bounds of a Digest's fields, in bytes (inputs and errors) or entries (tools of a step).
const (
	maxDigestInput  = 80
	maxDigestError  = 160
	maxDigestAnswer = 240
	maxDigestTools  = 12
)

// DigestLevel says how much of a child's turn its Digest shows, a worker's setting.
type DigestLevel string

// Digest levels.
const (
	// DigestFull shows every field: tool inputs' short forms, errors' first lines, the
	// answer's head.
	DigestFull DigestLevel = "full"
	// DigestNames shows the steps, the tools' names, results and durations, the nested
	// runs and the stop reason, but no tool input, no error text and no answer: for
	// deployments whose tool inputs are sensitive.
	DigestNames DigestLevel = "names"
	// DigestOff builds no digest.
	DigestOff DigestLevel = "off"
)

// ParseDigestLevel parses full, names or off; "" is full.
func ParseDigestLevel(s string) (DigestLevel, error) {
	switch l := DigestLevel(s); l {
	case "":
		return DigestFull, nil
	case DigestFull, DigestNames, DigestOff:
		return l, nil
	}
	return "", fmt.Errorf("subagent: digest level %q: want full, names or off", s)
}

// Tool call results in a Digest.
const (
	ToolResultOK    = "ok"
	ToolResultError = "error"
	// ToolResultNone: the call has no result, its turn ended first (a cancel while it ran).
	ToolResultNone = "none"
)

// Digest is a bounded account of what a child did in its turn (docs/digest.md): per model
// step its tokens and duration, per tool call its name, a short form of its input, its result
// and duration, the nested runs, the answer's head and the stop reason. It never holds a
// tool's output or a file's content. Its JSON encoding stays within MaxDigestBytes: when the
// steps do not fit, the first and the last are kept and OmittedSteps counts the middle.
type Digest struct {
	Level        DigestLevel  `json:"level"`
	StopReason   StopReason   `json:"stopReason,omitempty"`
	TotalSteps   int          `json:"totalSteps"`
	ToolCalls    int          `json:"toolCalls"`
	ToolErrors   int          `json:"toolErrors"`
	InputTokens  int64        `json:"inputTokens"`
	OutputTokens int64        `json:"outputTokens"`
	Steps        []DigestStep `json:"steps"`
	// OmittedSteps counts the steps left out between the first and the last kept.
	OmittedSteps int `json:"omittedSteps,omitempty"`
	// Answer is the head of the final answer's text (DigestFull only).
	Answer string `json:"answer,omitempty"`
	// EndMessage is the first line of the turn/end's error message, when the turn failed.
	EndMessage string `json:"endMessage,omitempty"`
}

// DigestStep is one model step of a Digest.
type DigestStep struct {
	Step         int   `json:"step"`
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	// DurationMs is the model request's: from the step's start to its assistant message.
	DurationMs int64        `json:"durationMs"`
	Tools      []DigestTool `json:"tools,omitempty"`
	// OmittedTools counts the step's tool calls past the first maxDigestTools.
	OmittedTools int `json:"omittedTools,omitempty"`
}

// DigestTool is one tool call of a DigestStep.
type DigestTool struct {
	Name string `json:"name"`
	// Input is the short form of the call's input (a path, a pattern, a command's head).
	Input string `json:"input,omitempty"`
	// Result is ToolResultOK, ToolResultError or ToolResultNone.
	Result string `json:"result"`
	// Error is the first line of a failed call's error.
	Error      string `json:"error,omitempty"`
	DurationMs int64  `json:"durationMs"`
	// WorkflowID is the nested run of a subagent call.
	WorkflowID string `json:"workflowId,omitempty"`
}

// DigestOptions configure a DigestBuilder.
type DigestOptions struct {
	// Level is the digest level; "" is DigestFull.
	Level DigestLevel
	// Nested returns the workflow id of the nested run a tool call delegated to, "" when the
	// call delegates nothing.
	Nested func(tool, callID string) string
}

// DigestBuilder builds a Digest from a child's own events, fed in seq order (as a Collector
// is). The zero value is not ready: use NewDigestBuilder.
type DigestBuilder struct {
	opts  DigestOptions
	d     Digest
	calls map[string]*DigestTool // tool calls of the current step, by call id
	last  time.Time              // the time of the step's last message or tool result
	start time.Time              // the current step's start
	cur   *DigestStep
	tool  *DigestTool // the latest tool call with a result
	c     Collector
}

// NewDigestBuilder returns a builder with opts.
func NewDigestBuilder(opts DigestOptions) *DigestBuilder {
	if opts.Level == "" {
		opts.Level = DigestFull
	}
	return &DigestBuilder{opts: opts, d: Digest{Level: opts.Level}}
}

// Add takes one event into account; events of other types and malformed ones are ignored.
func (b *DigestBuilder) Add(ev session.Event) {
	_ = b.c.Add(ev)
	switch ev.Type {
	case session.TypeStepStart:
		var d session.StepData
		if ev.Decode(&d) != nil {
			return
		}
		b.d.TotalSteps++
		// Room for the bound: the calls map points into Tools, which must not move.
		b.d.Steps = append(b.d.Steps, DigestStep{Step: d.Step, Tools: make([]DigestTool, 0, maxDigestTools)})
		b.cur = &b.d.Steps[len(b.d.Steps)-1]
		b.calls = map[string]*DigestTool{}
		b.start, b.last = ev.Time, ev.Time
	case session.TypeAssistantMessage:
		var d session.AssistantMessageData
		if ev.Decode(&d) != nil || b.cur == nil {
			return
		}
		if d.Usage != nil {
			b.cur.InputTokens += d.Usage.InputTokens
			b.cur.OutputTokens += d.Usage.OutputTokens
			b.d.InputTokens += d.Usage.InputTokens
			b.d.OutputTokens += d.Usage.OutputTokens
		}
		b.cur.DurationMs = millis(b.start, ev.Time)
		b.last = ev.Time
		for _, blk := range d.Message.Content {
			if blk.Type != session.BlockToolCall {
				continue
			}
			b.d.ToolCalls++
			if len(b.cur.Tools) >= maxDigestTools {
				b.cur.OmittedTools++
				continue
			}
			t := DigestTool{Name: blk.Name, Result: ToolResultNone}
			if b.opts.Level == DigestFull {
				t.Input = ShortInput(blk.Input)
			}
			if b.opts.Nested != nil {
				t.WorkflowID = b.opts.Nested(blk.Name, blk.ID)
			}
			b.cur.Tools = append(b.cur.Tools, t)
			b.calls[blk.ID] = &b.cur.Tools[len(b.cur.Tools)-1]
		}
	case session.TypeToolResult:
		var d session.ToolResultData
		if ev.Decode(&d) != nil {
			return
		}
		if d.IsError {
			b.d.ToolErrors++
		}
		t := b.calls[d.CallID]
		if t == nil {
			return // a call past the step's bound, or a result of an earlier step
		}
		t.Result = ToolResultOK
		if d.IsError {
			t.Result = ToolResultError
			if b.opts.Level == DigestFull {
				t.Error = FirstLine(session.JoinText(d.Content), maxDigestError)
			}
		}
		// Tools run one after the other: each starts when the one before it ended.
		t.DurationMs = millis(b.last, ev.Time)
		b.last = ev.Time
		b.tool = t
	case session.TypeTurnEnd:
		var d session.TurnEndData
		if ev.Decode(&d) == nil && d.Reason.Message != "" && b.opts.Level == DigestFull {
			b.d.EndMessage = FirstLine(d.Reason.Message, maxDigestError)
		}
	}
}

// Level returns the builder's digest level.
func (b *DigestBuilder) Level() DigestLevel { return b.opts.Level }

// Step returns the current step's number, 0 before the first.
func (b *DigestBuilder) Step() int {
	if b.cur == nil {
		return 0
	}
	return b.cur.Step
}

// LastTool returns the latest tool call with a result as one line, "read_file notes.txt: ok"
// (its input left out below DigestFull), or "" when none returned yet.
func (b *DigestBuilder) LastTool() string {
	if b.tool == nil {
		return ""
	}
	s := b.tool.Name
	if b.tool.Input != "" {
		s += " " + b.tool.Input
	}
	s += ": " + b.tool.Result
	if b.tool.Error != "" {
		s += " " + b.tool.Error
	}
	return s
}

// Digest returns the digest of the events added so far with the run's stop reason, within
// MaxDigestBytes; nil at DigestOff.
func (b *DigestBuilder) Digest(stop StopReason) *Digest {
	if b.opts.Level == DigestOff {
		return nil
	}
	d := b.d
	d.StopReason = stop
	d.Steps = append([]DigestStep(nil), b.d.Steps...)
	for i := range d.Steps {
		if len(d.Steps[i].Tools) == 0 {
			d.Steps[i].Tools = nil
			continue
		}
		d.Steps[i].Tools = append([]DigestTool(nil), d.Steps[i].Tools...)
	}
	if d.Steps == nil {
		d.Steps = []DigestStep{}
	}
	if b.opts.Level == DigestFull {
		d.Answer = Head(session.JoinText(b.c.Output()), maxDigestAnswer)
	}
	d.bound()
	return &d
}

// BuildDigest returns the digest of a child's own events with the run's stop reason.
func BuildDigest(events []session.Event, stop StopReason, opts DigestOptions) *Digest {
	b := NewDigestBuilder(opts)
	for _, ev := range events {
		b.Add(ev)
	}
	return b.Digest(stop)
}

// bound drops steps from the middle until the encoding fits MaxDigestBytes: it keeps steps
// from both ends in turn, the first, the last, the second, the one before the last, …
func (d *Digest) bound() {
	if size(d) <= MaxDigestBytes {
		return
	}
	steps := d.Steps
	d.Steps = nil
	// Room for the steps: the rest of the digest, the omitted count and the separators.
	room := MaxDigestBytes - size(d) - len(`,"omittedSteps":1000000`)
	sizes := make([]int, len(steps))
	for i := range steps {
		sizes[i] = size(steps[i]) + 1
	}
	head, tail := 0, len(steps) // keep steps[:head] and steps[tail:]
	for head < tail {
		i := head
		if (head+len(steps)-tail)%2 == 1 {
			i = tail - 1
		}
		if sizes[i] > room {
			break
		}
		room -= sizes[i]
		if i == head {
			head++
		} else {
			tail--
		}
	}
	d.Steps = append(append([]DigestStep{}, steps[:head]...), steps[tail:]...)
	d.OmittedSteps = tail - head
}

func size(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

// millis returns the milliseconds from a to b, 0 when either is unknown or b is before a.
func millis(a, b time.Time) int64 {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return 0
	}
	return b.Sub(a).Milliseconds()
}

// shortInputKeys are the input fields a tool call's short form may show, in order of
// preference: what names the call's target, never content.
var shortInputKeys = []string{"path", "file", "pattern", "glob", "command", "cmd", "query", "url", "label", "name"}

// ShortInput returns the short form of a tool call's input: the first of its path, pattern,
// command (its first line), query, URL or label fields, at most 80 bytes. Other fields —
// contents, tasks, free text — are never shown: an input without any of them has no short
// form.
func ShortInput(input json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(input, &fields) != nil {
		return ""
	}
	for _, k := range shortInputKeys {
		var s string
		if json.Unmarshal(fields[k], &s) == nil && s != "" {
			return FirstLine(s, maxDigestInput)
		}
	}
	return ""
}

// FirstLine returns s's first non-empty line, trimmed, at most max bytes (cut at a rune
// boundary, with "…").
func FirstLine(s string, max int) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			return Head(line, max)
		}
	}
	return ""
}

// Head returns s, or its first max bytes cut at a rune boundary followed by "…".
func Head(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
