package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/subflow-dev/subflow/worker/app"
)

// TestReplayExitCodes: the gate exits 1 naming every history that does not replay, 0 when
// all do.
func TestReplayExitCodes(t *testing.T) {
	var out, errOut strings.Builder
	rep := app.ReplayReport{Replayed: []string{"a.json"}, Failed: []app.ReplayFailure{
		{Run: "subagent-1 (run r1)", Err: errors.New("nondeterministic workflow")},
		{Run: "subagent-2 (run r2)", Err: errors.New("nondeterministic workflow")},
	}}
	assert.Equal(t, 1, printReplay(rep, false, &out, &errOut))
	assert.Contains(t, errOut.String(), "FAIL  subagent-1 (run r1): nondeterministic workflow")
	assert.Contains(t, errOut.String(), "FAIL  subagent-2 (run r2)")
	assert.Contains(t, out.String(), "1 replayed, 0 skipped (pinned to another version), 2 failed")

	out.Reset()
	assert.Equal(t, 0, printReplay(app.ReplayReport{Replayed: []string{"a.json"}}, false, &out, &errOut))
	assert.Equal(t, 2, runReplay([]string{"stray"}, &out, &errOut), "bad usage")
	assert.Equal(t, 1, runReplay([]string{"--dir", t.TempDir()}, &out, &errOut), "no history to replay is a failure")
}
