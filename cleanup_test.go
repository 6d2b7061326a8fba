package subflow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCleanupOffsetSpreadsQueues: each queue's cleanup fires at its own point of the
// interval, the same one at every worker start, so the queues of a cluster do not all walk
// the store at the same full hour.
func TestCleanupOffsetSpreadsQueues(t *testing.T) {
	seen := map[time.Duration]bool{}
	for _, q := range []string{"subflow", "ws-a", "ws-b", "ws-c", "batch-east", "batch-west"} {
		id := CleanupScheduleID(q)
		off := cleanupOffset(id, time.Hour)
		assert.GreaterOrEqual(t, off, time.Duration(0))
		assert.Less(t, off, time.Hour)
		assert.Equal(t, off.Truncate(time.Second), off, "whole seconds")
		assert.Equal(t, off, cleanupOffset(id, time.Hour), "fixed by the id")
		seen[off] = true
	}
	assert.Greater(t, len(seen), 1, "the queues share one firing time")
	assert.Zero(t, cleanupOffset("subflow-gc", time.Second), "no room for an offset")
}
