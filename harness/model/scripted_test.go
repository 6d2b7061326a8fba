package model

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
)

// writeScript writes a script file into dir and returns its name.
func writeScript(t *testing.T, dir, name, content string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	return name
}

func scriptedRequest(dir, script, sessionID string, assistants int) Request {
	req := Request{SessionID: sessionID, Cwd: dir, Model: script}
	req.Messages = append(req.Messages, Message{Role: RoleUser, Content: []session.Block{session.Text("go")}})
	for i := range assistants {
		req.Messages = append(req.Messages,
			Message{Role: RoleAssistant, Content: []session.Block{session.Text(fmt.Sprintf("answer %d", i))}},
			Message{Role: RoleUser, Content: []session.Block{session.Text("more")}},
		)
	}
	return req
}

func TestScriptedTextInChunks(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [
		{"text": "hello wörld", "chunks": 3},
		{"text": "ab", "chunks": 5},
		{"text": "one piece"},
		{"text": ""},
		{"text": "slow", "chunks": 2, "delayMs": 4}
	]}`)
	m := NewScripted()
	req := scriptedRequest(dir, script, "s1", 0)

	var deltas []string
	resp, err := m.Stream(context.Background(), req, collect(&deltas))
	require.NoError(t, err)
	assert.Equal(t, []string{"hell", "o wö", "rld"}, deltas, "split by runes, as evenly as possible")
	assert.Equal(t, "hello wörld", resp.Text)
	assert.Equal(t, FinishStop, resp.Finish)
	assert.Empty(t, resp.ToolCalls)
	assert.Equal(t, int64(3), resp.Usage.OutputTokens, "11 runes / 4, rounded up")
	assert.Equal(t, int64(1), resp.Usage.InputTokens, `"go" is 2 runes`)

	deltas = nil
	resp, err = m.Stream(context.Background(), req, collect(&deltas))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, deltas, "never more pieces than runes, never an empty one")
	assert.Equal(t, "ab", resp.Text)

	deltas = nil
	resp, err = m.Stream(context.Background(), req, collect(&deltas))
	require.NoError(t, err)
	assert.Equal(t, []string{"one piece"}, deltas, "chunks defaults to 1")

	deltas = nil
	resp, err = m.Stream(context.Background(), req, collect(&deltas))
	require.NoError(t, err)
	assert.Empty(t, deltas)
	assert.Equal(t, Response{Finish: FinishStop, Usage: session.Usage{InputTokens: 1}}, resp)

	deltas = nil
	resp, err = m.Stream(context.Background(), req, collect(&deltas))
	require.NoError(t, err)
	assert.Equal(t, []string{"sl", "ow"}, deltas)
	assert.Equal(t, "slow", resp.Text)
}

func TestScriptedToolCallsAndFinish(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [
		{"text": "Reading.", "toolCalls": [
			{"name": "read_file", "input": {"path": "a.txt"}},
			{"name": "list"}
		]},
		{"text": "truncat", "finish": "length"},
		{"text": "fine", "finish": "stop"},
		{"toolCalls": [{"name": "grep", "input": {"pattern": "x"}}]}
	]}`)
	m := NewScripted()
	req := scriptedRequest(dir, script, "s1", 0)

	resp, err := m.Stream(context.Background(), req, nil)
	require.NoError(t, err)
	assert.Equal(t, "Reading.", resp.Text)
	assert.Equal(t, FinishToolCalls, resp.Finish)
	assert.Equal(t, []ToolCall{
		{ID: "call_0_0", Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)},
		{ID: "call_0_1", Name: "list", Input: json.RawMessage(`{}`)},
	}, resp.ToolCalls)

	resp, err = m.Stream(context.Background(), req, nil)
	require.NoError(t, err)
	assert.Equal(t, Response{Text: "truncat", Finish: FinishLength, Usage: resp.Usage}, resp)

	resp, err = m.Stream(context.Background(), req, nil)
	require.NoError(t, err)
	assert.Equal(t, FinishStop, resp.Finish)

	resp, err = m.Stream(context.Background(), req, nil)
	require.NoError(t, err)
	assert.Equal(t, []ToolCall{{ID: "call_3_0", Name: "grep", Input: json.RawMessage(`{"pattern":"x"}`)}}, resp.ToolCalls,
		"ids carry the response index, so they stay unique within the session")
	assert.Positive(t, resp.Usage.OutputTokens)
}

func TestScriptedErrorConsumesPositionAndExhausts(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [
		{"error": "upstream exploded"},
		{"text": "partial ", "error": "cut off"},
		{"text": "after"}
	]}`)
	m := NewScripted()
	req := scriptedRequest(dir, script, "s1", 0)

	_, err := m.Stream(context.Background(), req, nil)
	require.EqualError(t, err, "upstream exploded")

	var deltas []string
	resp, err := m.Stream(context.Background(), req, collect(&deltas))
	require.EqualError(t, err, "cut off")
	assert.Zero(t, resp)
	assert.Equal(t, []string{"partial "}, deltas, "text before an error is streamed")

	resp, err = m.Stream(context.Background(), req, nil)
	require.NoError(t, err)
	assert.Equal(t, "after", resp.Text)

	_, err = m.Stream(context.Background(), req, nil)
	require.ErrorIs(t, err, ErrScriptExhausted)
	assert.EqualError(t, err, "script exhausted")
	_, err = m.Stream(context.Background(), req, nil)
	assert.ErrorIs(t, err, ErrScriptExhausted)
}

func TestScriptedPositionRule(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [
		{"text": "r0"}, {"text": "r1"}, {"text": "r2"}, {"text": "r3"}, {"text": "r4"}
	]}`)
	m := NewScripted()
	ask := func(req Request) string {
		t.Helper()
		resp, err := m.Stream(context.Background(), req, nil)
		require.NoError(t, err)
		return resp.Text
	}

	// A fork child or a resumed session: two answers already in its history.
	assert.Equal(t, "r2", ask(scriptedRequest(dir, script, "fork", 2)))
	// From then on the in-memory position decides, whatever the history says.
	assert.Equal(t, "r3", ask(scriptedRequest(dir, script, "fork", 0)))
	assert.Equal(t, "r4", ask(scriptedRequest(dir, script, "fork", 2)))

	// Sessions are independent.
	assert.Equal(t, "r0", ask(scriptedRequest(dir, script, "fresh", 0)))
	assert.Equal(t, "r1", ask(scriptedRequest(dir, script, "fresh", 0)))

	// A new process (a new Scripted) resuming "fresh" with its two stored answers continues.
	assert.Equal(t, "r2", func() string {
		resp, err := NewScripted().Stream(context.Background(), scriptedRequest(dir, script, "fresh", 2), nil)
		require.NoError(t, err)
		return resp.Text
	}())

	// Without a session id every request is positioned by its history alone.
	assert.Equal(t, "r1", ask(scriptedRequest(dir, script, "", 1)))
	assert.Equal(t, "r1", ask(scriptedRequest(dir, script, "", 1)))
}

func TestScriptedConcurrentRequestsTakeDistinctResponses(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	var responses []string
	for i := range n {
		responses = append(responses, fmt.Sprintf(`{"text": "r%02d"}`, i))
	}
	script := writeScript(t, dir, "s.json", fmt.Sprintf(`{"responses": [%s]}`, strings.Join(responses, ",")))
	m := NewScripted()

	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := m.Stream(context.Background(), scriptedRequest(dir, script, "s1", 0), nil)
			assert.NoError(t, err)
			mu.Lock()
			got = append(got, resp.Text)
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Strings(got)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("r%02d", i))
	}
	assert.Equal(t, want, got)
}

func TestScriptedCancelDuringDelay(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [
		{"text": "never", "chunks": 2, "delayMs": 3600000},
		{"toolCalls": [{"name": "x"}], "delayMs": 3600000},
		{"text": "next"}
	]}`)
	m := NewScripted()
	req := scriptedRequest(dir, script, "s1", 0)

	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel)
		var deltas []string
		resp, err := m.Stream(ctx, req, collect(&deltas))
		require.ErrorIs(t, err, context.Canceled)
		assert.Zero(t, resp)
		assert.Empty(t, deltas)
		cancel()
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Stream(ctx, req, nil)
	assert.ErrorIs(t, err, context.Canceled, "an already-cancelled request fails at once")
}

// A cancelled request leaves no assistant message, so the request that redoes its step must
// take the same response, in this process as in a new one resuming from the stored history.
func TestScriptedCancelledRequestGivesItsPositionBack(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [
		{"text": "one", "delayMs": 200},
		{"text": "two"}
	]}`)
	m := NewScripted()
	req := scriptedRequest(dir, script, "s1", 0)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	_, err := m.Stream(ctx, req, nil)
	require.ErrorIs(t, err, context.Canceled)
	cancel()

	for _, want := range []string{"one", "two"} {
		resp, err := m.Stream(context.Background(), req, nil)
		require.NoError(t, err)
		assert.Equal(t, want, resp.Text)
	}
}

// A caller that cancels the request as it receives the last piece of text (it could not
// store it) gets no answer, and the redo of its step takes the same response.
func TestScriptedCancelOnTheLastPieceGivesThePositionBack(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [{"text": "fine", "chunks": 4}]}`)
	m := NewScripted()
	req := scriptedRequest(dir, script, "s1", 0)

	ctx, cancel := context.WithCancel(context.Background())
	var deltas []string
	_, err := m.Stream(ctx, req, func(d string) {
		deltas = append(deltas, d)
		if len(deltas) == 4 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{"f", "i", "n", "e"}, deltas)

	resp, err := m.Stream(context.Background(), req, nil)
	require.NoError(t, err)
	assert.Equal(t, "fine", resp.Text)
}

func TestScriptedScriptPaths(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	writeScript(t, dir, "sub/s.json", `{"responses": [{"text": "found"}]}`)
	m := NewScripted()

	resp, err := m.Stream(context.Background(), scriptedRequest(dir, "sub/s.json", "rel", 0), nil)
	require.NoError(t, err)
	assert.Equal(t, "found", resp.Text, "relative to the session cwd")

	abs := filepath.Join(dir, "sub", "s.json")
	resp, err = m.Stream(context.Background(), scriptedRequest(t.TempDir(), abs, "abs", 0), nil)
	require.NoError(t, err)
	assert.Equal(t, "found", resp.Text)

	_, err = m.Stream(context.Background(), scriptedRequest(dir, "", "none", 0), nil)
	assert.ErrorContains(t, err, "the model name must be the path of a JSON script")
}

func TestScriptedReloadsChangedScript(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [{"text": "old"}]}`)
	m := NewScripted()
	resp, err := m.Stream(context.Background(), scriptedRequest(dir, script, "a", 0), nil)
	require.NoError(t, err)
	assert.Equal(t, "old", resp.Text)

	writeScript(t, dir, "s.json", `{"responses": [{"text": "brand new"}]}`)
	resp, err = m.Stream(context.Background(), scriptedRequest(dir, script, "b", 0), nil)
	require.NoError(t, err)
	assert.Equal(t, "brand new", resp.Text)
}

func TestScriptedBadScripts(t *testing.T) {
	cases := []struct {
		name, content string
		want          string
	}{
		{"invalid json", `{"responses": [`, "invalid JSON"},
		{"no responses", `{"answers": []}`, `no "responses" array`},
		{"empty response", `{"responses": [{"text": "ok"}, {"chunks": 2}]}`, `response 1: needs "text", "toolCalls" or "error"`},
		{"bad finish", `{"responses": [{"text": "ok", "finish": "done"}]}`, `response 0: bad finish "done" (want "stop" or "length")`},
		{"unknown field", `{"responses": [{"text": "ok", "chunk": 3}]}`, `response 0: invalid response: json: unknown field "chunk"`},
		{"negative chunks", `{"responses": [{"text": "ok", "chunks": -1}]}`, "response 0: bad chunks -1"},
		{"negative delay", `{"responses": [{"text": "ok", "delayMs": -5}]}`, "response 0: bad delayMs -5"},
		{"nameless tool", `{"responses": [{"toolCalls": [{"input": {}}]}]}`, "response 0: tool call 0: no name"},
		{"non-object input", `{"responses": [{"toolCalls": [{"name": "x", "input": [1]}]}]}`, "response 0: tool call 0 (x): input is not a JSON object"},
		{"empty error", `{"responses": [{"error": ""}]}`, `response 0: empty "error"`},
		{"error with tools", `{"responses": [{"error": "e", "toolCalls": [{"name": "x"}]}]}`, `response 0: "error" cannot be combined with "toolCalls"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			script := writeScript(t, dir, "bad.json", tc.content)
			_, err := NewScripted().Stream(context.Background(), scriptedRequest(dir, script, "s1", 0), nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), filepath.Join(dir, "bad.json"), "names the file")
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("missing file", func(t *testing.T) {
		dir := t.TempDir()
		_, err := NewScripted().Stream(context.Background(), scriptedRequest(dir, "nope.json", "s1", 0), nil)
		require.ErrorIs(t, err, os.ErrNotExist)
		assert.Contains(t, err.Error(), "scripted: script "+filepath.Join(dir, "nope.json"))
	})
}

func TestScriptedThroughRegistry(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [{"text": "registered"}]}`)
	m, err := NewDefaultRegistry().Lookup(ProviderScripted)
	require.NoError(t, err)
	resp, err := m.Stream(context.Background(), scriptedRequest(dir, script, "s1", 0), nil)
	require.NoError(t, err)
	assert.Equal(t, "registered", resp.Text)
}

func TestSplitRunes(t *testing.T) {
	assert.Nil(t, splitRunes("", 3))
	assert.Equal(t, []string{"abc"}, splitRunes("abc", 1))
	assert.Equal(t, []string{"ab", "c"}, splitRunes("abc", 2))
	assert.Equal(t, []string{"日本", "語"}, splitRunes("日本語", 2))
	assert.Equal(t, []string{"a", "b", "c"}, splitRunes("abc", 10))
	assert.Equal(t, []string{"aa", "aa", "a", "a"}, splitRunes("aaaaaa", 4))
}

func BenchmarkScriptedStream(b *testing.B) {
	dir := b.TempDir()
	script := writeScriptB(b, dir, `{"responses": [{"text": "The quick brown fox jumps over the lazy dog.", "chunks": 8}]}`)
	m := NewScripted()
	req := Request{Cwd: dir, Model: script, Messages: []Message{{Role: RoleUser, Content: []session.Block{session.Text("go")}}}}
	onText := func(string) {}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Stream(context.Background(), req, onText); err != nil {
			b.Fatal(err)
		}
	}
}

func writeScriptB(b *testing.B, dir, content string) string {
	b.Helper()
	if err := os.WriteFile(filepath.Join(dir, "s.json"), []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	return "s.json"
}

// An answer the caller gives back (it could not store the assistant message) is taken again
// by the session's next request, the redo of its step; unless that request's history shows
// the message was stored after all, when the position moves on.
func TestScriptedGivenBackAnswerIsTakenAgain(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "s.json", `{"responses": [{"text": "one"}, {"text": "two"}, {"text": "three"}]}`)
	m := NewScripted()
	ask := func(req Request, giveBack bool) string {
		t.Helper()
		ctx, back := WithGiveBack(context.Background())
		resp, err := m.Stream(ctx, req, nil)
		require.NoError(t, err)
		if giveBack {
			back()
			back() // idempotent
		}
		return resp.Text
	}

	assert.Equal(t, "one", ask(scriptedRequest(dir, script, "s1", 0), true))
	assert.Equal(t, "one", ask(scriptedRequest(dir, script, "s1", 0), false), "the step's redo takes it again")
	assert.Equal(t, "two", ask(scriptedRequest(dir, script, "s1", 1), true))
	assert.Equal(t, "three", ask(scriptedRequest(dir, script, "s1", 2), false),
		"the store kept the message it reported failed: the next step takes the next response")

	// Without a WithGiveBack in the context nothing is registered, and a give-back after a
	// later request took a position changes nothing.
	resp, err := m.Stream(context.Background(), scriptedRequest(dir, script, "s2", 0), nil)
	require.NoError(t, err)
	assert.Equal(t, "one", resp.Text)
	ctx, back := WithGiveBack(context.Background())
	_, err = m.Stream(ctx, scriptedRequest(dir, script, "s3", 0), nil)
	require.NoError(t, err)
	assert.Equal(t, "two", ask(scriptedRequest(dir, script, "s3", 0), false))
	back()
	assert.Equal(t, "three", ask(scriptedRequest(dir, script, "s3", 0), false))
}

// A value forgets a session once it has settled (its last request answered at the position its
// history showed) and enough other sessions were asked since, so its memory does not grow with
// the sessions it has answered; the forgotten session's next request is positioned by its
// history, as the value would have positioned it. A session whose request failed, or whose
// request is under way, is kept.
func TestScriptedForgetsSettledSessions(t *testing.T) {
	dir := t.TempDir()
	failing := writeScript(t, dir, "failing.json", `{"responses": [{"error": "boom"}, {"text": "after the error"}]}`)
	plain := writeScript(t, dir, "plain.json", `{"responses": [{"text": "a0"}, {"text": "a1"}]}`)
	slow := writeScript(t, dir, "slow.json", `{"responses": [{"text": "slow", "delayMs": 60000}]}`)
	const kept = 4
	m := &Scripted{kept: kept}
	known := func(id string) (st scriptedSession, ok bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if p := m.recent[id]; p != nil {
			return *p, true
		}
		if p := m.older[id]; p != nil {
			return *p, true
		}
		return scriptedSession{}, false
	}
	held := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.recent) + len(m.older)
	}

	_, err := m.Stream(context.Background(), scriptedRequest(dir, failing, "failed", 0), nil)
	require.EqualError(t, err, "boom")
	resp, err := m.Stream(context.Background(), scriptedRequest(dir, plain, "answered", 0), nil)
	require.NoError(t, err)
	require.Equal(t, "a0", resp.Text)
	ctx, cancel := context.WithCancel(context.Background())
	slowErr := make(chan error, 1)
	go func() {
		_, err := m.Stream(ctx, scriptedRequest(dir, slow, "under-way", 0), nil)
		slowErr <- err
	}()
	require.Eventually(t, func() bool { st, ok := known("under-way"); return ok && st.next == 1 },
		10*time.Second, time.Millisecond, "the slow request never took its position")

	for i := range 10 * kept {
		resp, err := m.Stream(context.Background(), scriptedRequest(dir, plain, fmt.Sprintf("other-%d", i), 0), nil)
		require.NoError(t, err)
		require.Equal(t, "a0", resp.Text)
		require.LessOrEqual(t, held(), 2*kept+2, "after %d other sessions", i+1)
	}
	_, ok := known("answered")
	assert.False(t, ok, "the settled session is forgotten")
	st, ok := known("failed")
	assert.True(t, ok, "the session whose request failed is kept")
	assert.Equal(t, 1, st.next)

	cancel()
	require.ErrorIs(t, <-slowErr, context.Canceled)
	st, ok = known("under-way")
	require.True(t, ok, "the session whose request was under way is kept")
	assert.Equal(t, 0, st.next, "the cancelled request gave its position back")

	resp, err = m.Stream(context.Background(), scriptedRequest(dir, failing, "failed", 0), nil)
	require.NoError(t, err)
	assert.Equal(t, "after the error", resp.Text, "the failed request's position stayed taken")
	resp, err = m.Stream(context.Background(), scriptedRequest(dir, plain, "answered", 1), nil)
	require.NoError(t, err)
	assert.Equal(t, "a1", resp.Text, "the forgotten session goes on where its history ends")
}
