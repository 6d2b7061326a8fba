package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/subflow-dev/subflow/subagent"
)

// TestBatchPageMidway: a running batch's page shows its rate since its start and the end
// that rate gives, and keeps only the last five failed tasks, newest first, their errors on
// one line and the message that ended a turn beside its stop reason.
func TestBatchPageMidway(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	s := BatchSummary{BatchID: "b", Total: 100, Done: 20, Running: 4, Queued: 76, Concurrency: 4, Started: start,
		ByStopReason: map[subagent.StopReason]int{subagent.StopCompleted: 13, subagent.StopError: 7}}
	for i := range 7 {
		s.noteFailed(BatchResult{Index: i, Label: "l|abel", WorkflowID: "wf", StopReason: subagent.StopError})
	}
	s.noteFailed(BatchResult{Index: 8, WorkflowID: "wf8", StopReason: subagent.StopError, EndMessage: "model request failed: 500\nbody"})
	s.noteFailed(BatchResult{Index: 9, Error: "rejected: bad\nsecond line"})
	page := BatchPage(s, start.Add(10*time.Second))
	assert.Contains(t, page, "**batch b** · running · 20 of 100 tasks done")
	assert.Contains(t, page, "| 76 | 4 | 13 | 0 | 7 | 0 | 0 | 0 |")
	// 2 runs/s: the 80 tasks left end in 40 s.
	assert.Contains(t, page, "| 4 | false | 2.00 | 2026-01-01T10:00:50Z | 0 / 0 |")
	assert.Contains(t, page, "\nAs of 2026-01-01T10:00:10Z.\n")
	assert.Len(t, s.LastFailed, 5)
	assert.Contains(t, page, "| 9 |  | failed: rejected: bad |  |\n"+
		"| 8 |  | error: model request failed: 500 | [wf8](/namespaces/{namespace}/workflows/wf8) |\n"+
		"| 6 | l\\|abel | error | [wf](/namespaces/{namespace}/workflows/wf) |")
	assert.NotContains(t, page, "| 2 | l")
	assert.False(t, strings.Contains(page, "second line"))
	assert.False(t, strings.Contains(page, "body"))

	s.Paused = true
	assert.Contains(t, BatchPage(s, start), "· paused ·")
}
