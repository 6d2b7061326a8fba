package subagent

import (
	"slices"
	"strings"

	"github.com/subflow-dev/subflow/harness/session"
)

// Collector selects a run's output from the child's own events, fed in seq order (contract R-6),
// and remembers the last turn/end. Feed it only events that belong to the run: never the
// fork seed, never events before the prompt's receipt. The zero value is ready to use.
type Collector struct {
	message  []session.Block // content of the last non-empty assistant message
	streamed strings.Builder // text-delta pieces
	lastEnd  *session.EndReason
}

// Add takes one event into account. Events of other types are ignored. A malformed
// assistant/message, assistant/chunk or turn/end payload returns the decode error and
// leaves the collector unchanged, so what was collected before stays usable.
func (c *Collector) Add(ev session.Event) error {
	switch ev.Type {
	case session.TypeAssistantMessage:
		var d session.AssistantMessageData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		if !isEmptyContent(d.Message.Content) {
			c.message = slices.Clone(d.Message.Content)
		}
	case session.TypeAssistantChunk:
		var d session.AssistantChunkData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		if d.Chunk.Type == session.ChunkTextDelta {
			c.streamed.WriteString(d.Chunk.Text)
		}
	case session.TypeTurnEnd:
		var d session.TurnEndData
		if err := ev.Decode(&d); err != nil {
			return err
		}
		c.lastEnd = &d.Reason
	}
	return nil
}

// Output returns the content of the last non-empty assistant message; else one text block
// holding every streamed text delta; else an empty, non-nil slice.
func (c *Collector) Output() []session.Block {
	if c.message != nil {
		return slices.Clone(c.message)
	}
	if c.streamed.Len() > 0 {
		return []session.Block{session.Text(c.streamed.String())}
	}
	return []session.Block{}
}

// LastTurnEnd returns the reason of the last turn/end seen, or nil when none was.
func (c *Collector) LastTurnEnd() *session.EndReason {
	if c.lastEnd == nil {
		return nil
	}
	r := *c.lastEnd
	return &r
}

// isEmptyContent reports whether content carries nothing a parent could use: no blocks, or
// only empty text blocks (a usage-only final message).
func isEmptyContent(content []session.Block) bool {
	for _, b := range content {
		if b.Type != session.BlockText || b.Text != "" {
			return false
		}
	}
	return true
}

// SelectOutput runs a Collector over events and returns its Output. It stops at the first
// malformed event and returns its error.
func SelectOutput(events []session.Event) ([]session.Block, error) {
	var c Collector
	for _, ev := range events {
		if err := c.Add(ev); err != nil {
			return nil, err
		}
	}
	return c.Output(), nil
}

// InProcessStopReason maps the last turn/end reason of an in-process run to its stop reason
// (contract R-28): completed, max-tokens and aborted map to themselves, blocked to refusal, and
// error, interrupted, an unknown kind or no turn at all (nil) to error. Callers settle a
// cancelled run that did not complete as aborted themselves.
func InProcessStopReason(end *session.EndReason) StopReason {
	if end == nil {
		return StopError
	}
	switch end.Kind {
	case session.EndCompleted:
		return StopCompleted
	case session.EndMaxTokens:
		return StopMaxTokens
	case session.EndAborted:
		return StopAborted
	case session.EndBlocked:
		return StopRefusal
	}
	return StopError
}

// SDKStopReason maps the last turn/end reason of an SDK child to its stop reason (contract
// completed, max-tokens and aborted (any cause) map to themselves; error,
// interrupted, blocked, an unknown kind or no turn at all (nil) map to error.
func SDKStopReason(end *session.EndReason) StopReason {
	if end != nil && end.Kind == session.EndBlocked {
		return StopError // an SDK child has no refusal: only the in-process harness blocks
	}
	return InProcessStopReason(end)
}
