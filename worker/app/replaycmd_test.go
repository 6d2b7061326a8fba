package app

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReplayExitCodes: the gate exits 1 naming every history that does not replay, 0 when
// all do.
func TestReplayExitCodes(t *testing.T) {
	var out, errOut strings.Builder
	rep := ReplayReport{Replayed: []string{"a.json"}, Failed: []ReplayFailure{
		{Run: "subagent-1 (run r1)", Err: errors.New("nondeterministic workflow")},
		{Run: "subagent-2 (run r2)", Err: errors.New("nondeterministic workflow")},
	}}
	assert.Equal(t, 1, printReplay(rep, false, &out, &errOut))
	assert.Contains(t, errOut.String(), "FAIL  subagent-1 (run r1): nondeterministic workflow")
	assert.Contains(t, errOut.String(), "FAIL  subagent-2 (run r2)")
	assert.Contains(t, out.String(), "1 replayed, 0 skipped (pinned to another version), 2 failed")

	out.Reset()
	assert.Equal(t, 0, printReplay(ReplayReport{Replayed: []string{"a.json"}}, false, &out, &errOut))
	assert.Equal(t, 2, replayMain("worker replay", []string{"stray"}, &out, &errOut), "bad usage")
	assert.Equal(t, 1, replayMain("worker replay", []string{"--dir", t.TempDir()}, &out, &errOut), "no history to replay is a failure")
}
