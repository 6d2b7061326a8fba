package activities_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/subflow-dev/subflow/activities"
)

// levelLog records the level and message of every line.
type levelLog struct{ lines *[]string }

func (l levelLog) add(level, msg string, keyvals []any) {
	*l.lines = append(*l.lines, fmt.Sprint(level, " ", msg, keyvals))
}
func (l levelLog) Debug(msg string, kv ...any) { l.add("debug", msg, kv) }
func (l levelLog) Info(msg string, kv ...any)  { l.add("info", msg, kv) }
func (l levelLog) Warn(msg string, kv ...any)  { l.add("warn", msg, kv) }
func (l levelLog) Error(msg string, kv ...any) { l.add("error", msg, kv) }

// TestQuietCancellations: the SDK's "Activity error." line of an activity ended by its
// cancellation is logged at info, through With too; any other error stays at error level.
func TestQuietCancellations(t *testing.T) {
	var lines []string
	l := activities.QuietCancellations(levelLog{&lines})
	l.Error("Activity error.", "ActivityType", "Drive", "Error", context.Canceled)
	l.Error("Activity error.", "Error", fmt.Errorf("drive: %w", context.Canceled))
	log.With(l, "WorkerID", "w1").Error("Activity error.", "Error", temporal.NewCanceledError("partial"))
	l.Error("Activity error.", "Error", errors.New("cwd does not exist"))
	l.Error("Failed to poll", "Error", context.Canceled)
	assert.Equal(t, []string{
		"info Activity error.[ActivityType Drive Error context canceled]",
		"info Activity error.[Error drive: context canceled]",
		"info Activity error.[WorkerID w1 Error canceled]",
		"error Activity error.[Error cwd does not exist]",
		"error Failed to poll[Error context canceled]",
	}, lines)
}
