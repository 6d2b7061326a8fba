package subagent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

// digestLog builds a child's log with timed events.
type digestLog struct {
	t      *testing.T
	at     time.Time
	events []session.Event
}

func (l *digestLog) add(after time.Duration, typ string, data any) {
	l.at = l.at.Add(after)
	e := ev(l.t, typ, data)
	e.Time = l.at
	l.events = append(l.events, e)
}

func (l *digestLog) step(n int, model time.Duration, text string, calls ...session.Block) {
	l.add(0, session.TypeStepStart, session.StepData{Step: n})
	content := calls
	if text != "" {
		content = append([]session.Block{session.Text(text)}, calls...)
	}
	l.add(model, session.TypeAssistantMessage, session.AssistantMessageData{Step: n,
		Message: session.AssistantMessage{ID: fmt.Sprint("m", n), Role: "assistant", Content: content},
		Usage:   &session.Usage{InputTokens: 100, OutputTokens: 10}})
}

func (l *digestLog) result(after time.Duration, id, name string, isError bool, text string) {
	l.add(after, session.TypeToolResult, session.ToolResultData{CallID: id, Name: name, IsError: isError,
		Content: []session.Block{session.Text(text)}})
}

func call(id, name, input string) session.Block {
	return session.Block{Type: session.BlockToolCall, ID: id, Name: name, Input: json.RawMessage(input)}
}

func TestDigestFields(t *testing.T) {
	l := &digestLog{t: t, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l.step(1, 1500*time.Millisecond, "",
		call("c1", "read_file", `{"path":"notes.txt","offset":3}`),
		call("c2", "write_file", `{"path":"out.md","content":"SECRET-CONTENT"}`),
		call("c3", "subagent", `{"task":"do it","label":"triage"}`))
	l.result(20*time.Millisecond, "c1", "read_file", false, "SECRET-FILE-TEXT")
	l.result(5*time.Millisecond, "c2", "write_file", true, "permission denied: out.md\nstack trace")
	l.result(2*time.Second, "c3", "subagent", false, "nested answer")
	l.step(2, 300*time.Millisecond, "All done: the answer.")
	l.add(0, session.TypeStepEnd, session.StepData{Step: 2})
	l.add(0, session.TypeTurnEnd, session.TurnEndData{Reason: session.EndReason{Kind: session.EndCompleted}})

	nested := func(tool, id string) string {
		if tool == "subagent" {
			return "wf-" + id
		}
		return ""
	}
	d := BuildDigest(l.events, StopCompleted, DigestOptions{Nested: nested})
	require.NotNil(t, d)
	assert.Equal(t, DigestFull, d.Level)
	assert.Equal(t, StopCompleted, d.StopReason)
	assert.Equal(t, 2, d.TotalSteps)
	assert.Equal(t, 3, d.ToolCalls)
	assert.Equal(t, 1, d.ToolErrors)
	assert.Equal(t, int64(200), d.InputTokens)
	assert.Equal(t, int64(20), d.OutputTokens)
	assert.Equal(t, "All done: the answer.", d.Answer)
	require.Len(t, d.Steps, 2)
	assert.Equal(t, DigestStep{Step: 1, InputTokens: 100, OutputTokens: 10, DurationMs: 1500, Tools: []DigestTool{
		{Name: "read_file", Input: "notes.txt", Result: ToolResultOK, DurationMs: 20},
		{Name: "write_file", Input: "out.md", Result: ToolResultError, Error: "permission denied: out.md", DurationMs: 5},
		{Name: "subagent", Input: "triage", Result: ToolResultOK, DurationMs: 2000, WorkflowID: "wf-c3"},
	}}, d.Steps[0])
	assert.Equal(t, DigestStep{Step: 2, InputTokens: 100, OutputTokens: 10, DurationMs: 300}, d.Steps[1])

	raw, err := json.Marshal(d)
	require.NoError(t, err)
	for _, secret := range []string{"SECRET-CONTENT", "SECRET-FILE-TEXT", "stack trace", "do it"} {
		assert.NotContains(t, string(raw), secret, "a tool's content or output reached the digest")
	}

	md := d.Markdown()
	assert.Contains(t, md, "**completed** · 2 steps · 3 tool calls (1 failed)")
	assert.Contains(t, md, "| write_file | `out.md` | error: permission denied: out.md | 5ms |")
	assert.Contains(t, md, "[subagent](/namespaces/{namespace}/workflows/wf-c3)")
	assert.Contains(t, md, "**Answer:** All done: the answer.")

	names := BuildDigest(l.events, StopCompleted, DigestOptions{Level: DigestNames, Nested: nested})
	assert.Empty(t, names.Answer)
	for _, tool := range names.Steps[0].Tools {
		assert.Empty(t, tool.Input)
		assert.Empty(t, tool.Error)
	}
	assert.Equal(t, ToolResultError, names.Steps[0].Tools[1].Result)
	assert.Equal(t, "wf-c3", names.Steps[0].Tools[2].WorkflowID)
	assert.Nil(t, BuildDigest(l.events, StopCompleted, DigestOptions{Level: DigestOff}))
}

// A tool whose turn ended before it returned (a cancel) has no result; the turn's error
// message shows its first line.
func TestDigestUnfinishedTool(t *testing.T) {
	l := &digestLog{t: t, at: time.Now()}
	l.step(1, time.Millisecond, "", call("c1", "run", `{"command":"sleep 100\necho done"}`))
	l.add(time.Second, session.TypeTurnEnd, session.TurnEndData{Reason: session.EndReason{Kind: session.EndError, Message: "model failed\ndetails"}})
	d := BuildDigest(l.events, StopAborted, DigestOptions{})
	require.Len(t, d.Steps, 1)
	assert.Equal(t, []DigestTool{{Name: "run", Input: "sleep 100", Result: ToolResultNone}}, d.Steps[0].Tools)
	assert.Equal(t, "model failed", d.EndMessage)
}

// However long the run, the digest stays within MaxDigestBytes, keeps the first and last
// steps and counts the ones it left out. 200 steps of 20 calls are already dozens of times
// the digest's room; 1,000 check that the count of omitted steps stays right far past it.
func TestDigestBound(t *testing.T) {
	for _, steps := range []int{200, 1000} {
		l := &digestLog{t: t, at: time.Now()}
		for i := 1; i <= steps; i++ {
			var calls []session.Block
			for j := range 20 {
				calls = append(calls, call(fmt.Sprint(i, "-", j), "grep", `{"pattern":"`+strings.Repeat("x", 500)+`"}`))
			}
			l.step(i, time.Millisecond, "", calls...)
			for j := range 20 {
				l.result(time.Millisecond, fmt.Sprint(i, "-", j), "grep", true, strings.Repeat("e", 500))
			}
		}
		d := BuildDigest(l.events, StopMaxTokens, DigestOptions{})
		raw, err := json.Marshal(d)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(raw), MaxDigestBytes)
		assert.Equal(t, steps, d.TotalSteps)
		assert.Equal(t, steps*20, d.ToolCalls)
		assert.Equal(t, 1, d.Steps[0].Step)
		assert.Equal(t, steps, d.Steps[len(d.Steps)-1].Step)
		assert.Equal(t, steps, len(d.Steps)+d.OmittedSteps)
		assert.Equal(t, 8, d.Steps[0].OmittedTools)
		assert.Len(t, d.Steps[0].Tools[0].Input, 80+len("…"))
		assert.Contains(t, d.Markdown(), fmt.Sprintf("%d steps omitted", d.OmittedSteps))
	}
}

func TestParseDigestLevel(t *testing.T) {
	for in, want := range map[string]DigestLevel{"": DigestFull, "full": DigestFull, "names": DigestNames, "off": DigestOff} {
		got, err := ParseDigestLevel(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := ParseDigestLevel("some")
	assert.ErrorContains(t, err, `digest level "some"`)
}
