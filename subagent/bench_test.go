package subagent

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/subflow-dev/subflow/harness/session"
)

// BenchmarkSelectOutput measures output selection over a long streamed transcript: 100
// steps of 100 text deltas and one message each.
func BenchmarkSelectOutput(b *testing.B) {
	var events []session.Event
	for step := range 100 {
		for i := range 100 {
			events = append(events, delta(b, "piece "+strconv.Itoa(i)+" "))
		}
		events = append(events, message(b, session.Text("answer "+strconv.Itoa(step))))
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := SelectOutput(events); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckSchema(b *testing.B) {
	raw := json.RawMessage(richSchema)
	for b.Loop() {
		if err := CheckSchema(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateValue(b *testing.B) {
	s, err := CompileSchema(json.RawMessage(richSchema))
	if err != nil {
		b.Fatal(err)
	}
	value := json.RawMessage(`{"name": "x", "count": 2, "kind": "a", "tags": ["t", "u"], "value": 3}`)
	for b.Loop() {
		if err := ValidateValue(s, value); err != nil {
			b.Fatal(err)
		}
	}
}
