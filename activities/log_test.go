package activities_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/subflow-dev/subflow/activities"
)

// TestEveryActivityLogLineCarriesTheRunIDs runs a whole in-process run and an sdk run with
// the worker's default level: every line names the workflow, its run and the child, so one
// grep finds everything about a delegation.
func TestEveryActivityLogLineCarriesTheRunIDs(t *testing.T) {
	f := newFixture(t, `{"text": "in-process answer"}`, `{"text": "sdk answer"}`)
	core, logs := observer.New(zapcore.InfoLevel)
	a := f.activities(func(c *activities.Config) { c.Logger = zap.New(core) })
	var sig signals
	activities.SetSignal(a, sig.record)
	e := newEnv(t, a, worker.Options{})

	req := request("say something")
	publish(t, e, "child-log", req)
	_, err := drive(e, "child-log", req)
	require.NoError(t, err)
	readResult(t, e, "child-log", req, false)
	_, err = runSDK(e, "run-log", request("say something else"))
	require.NoError(t, err)

	entries := logs.All()
	require.NotEmpty(t, entries)
	children := map[string]bool{}
	for _, entry := range entries {
		fields := entry.ContextMap()
		assert.NotEmpty(t, fields["workflowId"], "line %q: %v", entry.Message, fields)
		assert.NotEmpty(t, fields["runId"], "line %q: %v", entry.Message, fields)
		assert.NotEmpty(t, fields["childId"], "line %q: %v", entry.Message, fields)
		if id, ok := fields["childId"].(string); ok {
			children[id] = true
		}
	}
	assert.Equal(t, map[string]bool{"child-log": true, "run-log": true}, children)
}

// TestHeartbeatsCarryAHumanLine: the Temporal UI shows heartbeat details as JSON, and the
// first field reads as a sentence.
func TestHeartbeatsCarryAHumanLine(t *testing.T) {
	f := newFixture(t, `{"text": "hello from the child", "chunks": 4, "delayMs": 100}`)
	e := newEnv(t, f.activities(), worker.Options{})
	req := request("say hello")
	publish(t, e, "child-line", req)
	_, err := drive(e, "child-line", req)
	require.NoError(t, err)

	beats := e.progress()
	require.NotEmpty(t, beats)
	for _, p := range beats {
		want := p
		want.Summary = ""
		assert.Equal(t, want.String(), p.Summary)
	}
	// Tokens are counted once the step's message is in, which the last beat may or may not
	// have seen.
	assert.Regexp(t, `^running: step 1, [1-9][0-9]* B streamed(, [1-9][0-9]* tokens)?$`, beats[len(beats)-1].Summary)
}
