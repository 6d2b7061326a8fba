package subagent

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/subflow-dev/subflow/harness/session"
)

// TestBuildTranscript: the entries follow the log, each text, input and result cut at the
// bound with the count of what was left out, a cancelled turn's end names its cause, and the
// tokens add up.
func TestBuildTranscript(t *testing.T) {
	l := &digestLog{t: t, at: time.Now()}
	l.add(0, session.TypeInboxSpliced, session.InboxSplicedData{Inserted: []session.UserMessage{
		{ID: "u", Role: "user", Content: []session.Block{session.Text("do it")}},
	}})
	l.step(1, time.Millisecond, "looking", call("c1", "grep", `{"pattern":"`+strings.Repeat("p", 30)+`"}`))
	l.result(time.Millisecond, "c1", "grep", false, strings.Repeat("r", 50))
	l.add(0, session.TypeTurnEnd, session.TurnEndData{Reason: session.EndReason{Kind: session.EndAborted, Cause: session.CauseParent}})

	tr := BuildTranscript("s", l.events, 20)
	var got []string
	for _, e := range tr.Entries {
		got = append(got, e.Kind+"|"+e.Text+"|"+e.Input+"|"+e.End+"|"+e.Cause)
	}
	assert.Equal(t, []string{
		"prompt|do it|||",
		"step||||",
		"text|looking|||",
		`tool-call||{"pattern":"pppppppp…||`,
		"tool-result|" + strings.Repeat("r", 20) + "…|||",
		"turn-end|||aborted|parent",
	}, got)
	assert.Equal(t, 24, tr.Entries[3].CutBytes)
	assert.Equal(t, 30, tr.Entries[4].CutBytes)
	assert.Equal(t, int64(100), tr.InputTokens)
	assert.Equal(t, int64(10), tr.Entries[2].OutputTokens)

	whole := BuildTranscript("s", l.events, 0)
	assert.Equal(t, strings.Repeat("r", 50), whole.Entries[4].Text)
	assert.Zero(t, whole.Entries[4].CutBytes)
}
