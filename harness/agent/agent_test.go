package agent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
)

func TestForkSeedIsHistory(t *testing.T) {
	f := newFixture(t)
	f.create("parent", f.script(`{"text": "parent answer"}`, `{"text": "child answer"}`))
	p := f.open("parent")
	ask(t, p, "parent question")

	seed := session.ForkPrefix(f.events("parent"))
	h := session.Header{
		ID: "child", Cwd: f.cwd, ParentSession: "parent", Origin: session.OriginSubagent,
		DelegationDepth: 1, SeedLength: int64(len(seed)),
		Route: &session.Route{Provider: model.ProviderScripted, Model: "script.json"},
	}
	ctx := context.Background()
	require.NoError(t, f.store.Create(ctx, h))
	require.NoError(t, f.store.Append(ctx, "child", session.SeedEvents(seed)...))

	c := f.open("child")
	assert.Equal(t, h, c.Header())
	ask(t, c, "child question")

	events := f.events("child")
	own := events[h.SeedLength+1:]
	assert.Equal(t, int64(2), decode[session.InboxSplicedData](t, own[0]).Start, "the seed's two messages come first")
	assert.Equal(t, 2, decode[session.TurnStartData](t, own[1]).Turn, "turns count on from the seed's")
	msg := decode[session.AssistantMessageData](t, own[4])
	assert.Equal(t, "child answer", session.JoinText(msg.Message.Content), "the scripted model continues after the seed")
	reqs := f.recorder.requests()
	assert.Len(t, reqs[len(reqs)-1].Messages, 3)
}

// TestConcurrentUse drives one agent from several goroutines; the log must stay well formed
// (every turn closed, seqs dense) and subscribers must see exactly the log.
func TestConcurrentUse(t *testing.T) {
	f := newFixture(t)
	responses := make([]string, 60)
	for i := range responses {
		responses[i] = `{"text": "answer", "chunks": 3, "delayMs": 3}`
	}
	f.create("s1", f.script(responses...))
	a := f.open("s1")
	var sub collector
	defer a.Subscribe(sub.add)()

	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				_, err := a.Followup(ctx, []session.Block{session.Text("q")})
				require.NoError(t, err)
				if (g+i)%3 == 0 {
					a.Cancel(session.CauseUser)
				}
				require.NoError(t, a.WhenIdle(ctx))
				_ = a.Pending()
			}
		}()
	}
	wg.Wait()
	waitIdle(t, a)
	require.NoError(t, a.Close(ctx))

	events := f.events("s1")
	requireSameLog(t, sub.seen(), events, 0)
	open := false
	turns := 0
	for i, e := range events {
		require.Equal(t, int64(i), e.Seq)
		switch e.Type {
		case session.TypeTurnStart:
			require.False(t, open, "turn started inside a turn at seq %d", i)
			open = true
			turns++
			require.Equal(t, turns, decode[session.TurnStartData](t, e).Turn)
		case session.TypeTurnEnd:
			require.True(t, open)
			open = false
		}
	}
	require.False(t, open, "every turn ended")
	require.Positive(t, turns)
}

func TestLoadPresets(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		path := filepath.Join(dir, "presets.json")
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		return path
	}
	got, err := LoadPresets(write(`{"reviewer": {"tools": ["read_file", "grep"],
		"sections": [{"name": "persona", "order": 0, "text": "You review."}]}}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]Preset{"reviewer": {
		Name: "reviewer", Tools: []string{"read_file", "grep"},
		Sections: []Section{{Name: "persona", Order: 0, Text: "You review."}},
	}}, got)

	for body, want := range map[string]string{
		`{"x": {"tool": []}}`:                                                           `unknown field "tool"`,
		`{"x": {"sections": [{"order": 1, "text": "t"}]}}`:                              `preset "x": section 0 has no name`,
		`{"x": {"sections": [{"name": "a", "text": "t"}, {"name": "a", "text": "u"}]}}`: `duplicate section "a"`,
		`[1]`:  `cannot unmarshal array`,
		`null`: `want a JSON object of presets`,
	} {
		_, err := LoadPresets(write(body))
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, err.Error(), "presets.json")
	}
	_, err = LoadPresets(filepath.Join(dir, "absent.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
