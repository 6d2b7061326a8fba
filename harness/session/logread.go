package session

import "errors"

// UsageSince sums the token usage of the assistant messages among events from index seed on:
// a child's own requests, not those of the history a fork was seeded with (Header.SeedLength).
// A seed past the end sums nothing; messages without usage, or whose data does not decode,
// count nothing.
func UsageSince(events []Event, seed int64) Usage {
	var u Usage
	for i := min(max(seed, 0), int64(len(events))); i < int64(len(events)); i++ {
		if events[i].Type != TypeAssistantMessage {
			continue
		}
		var d AssistantMessageData
		if events[i].Decode(&d) == nil && d.Usage != nil {
			u.InputTokens += d.Usage.InputTokens
			u.OutputTokens += d.Usage.OutputTokens
		}
	}
	return u
}

// PendingStep returns the last step of a log that ends inside a step (its step/start, with no
// step/end or turn/end after it) and the call ids of that step that have a tool result. It
// fails when the log does not end inside a step, or an event of that step does not decode;
// the error carries no prefix, for the caller to name the session.
func PendingStep(events []Event) (StepData, map[string]bool, error) {
	answered := map[string]bool{}
	for i := len(events) - 1; i >= 0; i-- {
		ev := events[i]
		switch ev.Type {
		case TypeTurnEnd, TypeStepEnd:
			return StepData{}, nil, errors.New("the log does not end inside a step")
		case TypeToolResult:
			var d ToolResultData
			if err := ev.Decode(&d); err != nil {
				return StepData{}, nil, err
			}
			answered[d.CallID] = true
		case TypeStepStart:
			var d StepData
			if err := ev.Decode(&d); err != nil {
				return StepData{}, nil, err
			}
			return d, answered, nil
		}
	}
	return StepData{}, nil, errors.New("the log has no step")
}
