package workflows

import (
	"testing"

	"github.com/subflow-dev/subflow/workflows/replaytest"
)

// TestReplayRecordedHistories replays every history recorded in testdata/ (StartSubagent,
// Batch and ModelAdmission runs; see package replaytest for how to record one), so a
// change that breaks running workflows fails here.
func TestReplayRecordedHistories(t *testing.T) {
	replaytest.ReplayHistories(t, "testdata", StartSubagent, Batch, ModelAdmission)
}
