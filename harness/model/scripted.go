package model

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/subflow-dev/subflow/harness/session"
)

// ErrScriptExhausted fails a scripted request that comes after the script's last response.
var ErrScriptExhausted = errors.New("script exhausted")

// Scripted is the deterministic, offline model of contract §9. The model name is the path of a JSON
// script (relative paths resolve against Request.Cwd); each request of a session takes the
// session's next response.
//
// Position rule: the first time a session id is seen by this value, its position starts at the
// number of assistant messages in Request.Messages, so fork children (whose seed holds the
// parent's answers) and sessions resumed in a new process continue where their history ends.
// After that every request advances the position by one, failed ones included, except a
// request cancelled by its context before it returned (during a delay, or by the caller that
// could not store a piece of its text): it gives its position back, because it left no
// assistant message, so the request that redoes its step takes the same response, in this
// process as in a new one resuming from the stored history. Likewise an answer the caller
// gives back (WithGiveBack: the session log failed its assistant message) is taken again by
// the session's next request — unless that request's history holds more assistant messages
// than the given-back one's did: then the store had kept the message after all, and the
// position moves on. A request without a session id is stateless: its position is always
// that assistant-message count.
//
// A response with both "text" and "error" streams the text, then fails with the error. Usage is
// an estimate: a quarter of the rune count of the request (input) and of the answer (output),
// so that progress displays have numbers.
//
// The zero value is ready to use and safe for concurrent use. Its memory does not grow with the
// sessions it has answered. A session is settled once its last request was answered at the
// position its history showed: its next request's history shows the position again (one more
// assistant message, or the same count when the answer was given back), so the value may
// forget it, and does once at least keptSessions other sessions were asked after it. It
// forgets no other session: not one whose request is under way, nor one whose last request
// failed or was cancelled.
type Scripted struct {
	scripts scriptCache
	mu      sync.Mutex
	// recent and older hold the sessions' state by id, in two generations: once keptSessions
	// were added to recent it becomes older, and older's unsettled sessions move to the new
	// recent; its settled ones are forgotten.
	recent, older map[string]*scriptedSession
	added         int // sessions added to recent since it was new
	kept          int // keptSessions, or a test's smaller number
}

// keptSessions is how many sessions a Scripted is asked for before it forgets the settled ones
// of the generation before: it holds at most twice as many settled sessions, about 100 bytes
// each.
const keptSessions = 4096

// scriptedSession is the state of one session of a Scripted.
type scriptedSession struct {
	next     int             // the position of the session's next request
	returned *returnedAnswer // the session's latest answer, given back
	settled  bool
}

// returnedAnswer is an answer the caller gave back: its position, and the assistant messages
// in the history of the request it answered.
type returnedAnswer struct {
	idx, assistants int
}

// NewScripted returns an empty scripted model.
func NewScripted() *Scripted { return &Scripted{} }

// Stream answers req with the session's next scripted response.
func (m *Scripted) Stream(ctx context.Context, req Request, onText func(delta string)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	if req.Model == "" {
		return Response{}, errors.New("scripted: no script: the model name must be the path of a JSON script")
	}
	path := req.Model
	if !filepath.IsAbs(path) {
		path = filepath.Join(req.Cwd, path)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return Response{}, fmt.Errorf("scripted: script %s: %w", req.Model, err)
	}
	s, err := m.scripts.load(path)
	if err != nil {
		return Response{}, err
	}

	idx := m.claim(req)
	if idx >= len(s.responses) {
		return Response{}, ErrScriptExhausted
	}
	r := s.responses[idx]

	text := ""
	if r.Text != nil {
		text = *r.Text
	}
	err = streamText(ctx, text, r.Chunks, time.Duration(r.DelayMs)*time.Millisecond, onText)
	if err == nil {
		// Cancelled while its last piece was delivered (the caller could not store it): no
		// answer either.
		err = ctx.Err()
	}
	if err != nil {
		m.unclaim(req, idx)
		return Response{}, err
	}
	if r.Error != nil {
		return Response{}, errors.New(*r.Error)
	}

	resp := Response{Text: text, Finish: FinishStop}
	outRunes := utf8.RuneCountInString(text)
	for i, tc := range r.ToolCalls {
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{
			ID:    fmt.Sprintf("call_%d_%d", idx, i),
			Name:  tc.Name,
			Input: tc.Input,
		})
		outRunes += utf8.RuneCountInString(tc.Name) + utf8.RuneCount(tc.Input)
	}
	switch {
	case r.Finish == FinishLength:
		resp.Finish = FinishLength
	case len(resp.ToolCalls) > 0:
		resp.Finish = FinishToolCalls
	}
	resp.Usage = session.Usage{InputTokens: estimateTokens(requestRunes(req)), OutputTokens: estimateTokens(outRunes)}
	assistants := assistantCount(req.Messages)
	m.settle(req, idx, assistants)
	OnGiveBack(ctx, func() { m.giveBack(req, idx, assistants) })
	return resp, nil
}

// claim returns the position this request takes and advances the session's position.
func (m *Scripted) claim(req Request) int {
	if req.SessionID == "" {
		return assistantCount(req.Messages)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.session(req.SessionID)
	if st == nil {
		st = &scriptedSession{next: assistantCount(req.Messages)}
		m.add(req.SessionID, st)
	}
	pos := st.next
	if r := st.returned; r != nil {
		st.returned = nil
		if assistantCount(req.Messages) <= r.assistants {
			pos = r.idx // the redo of the step whose answer was not stored
		}
	}
	st.next, st.settled = pos+1, false
	return pos
}

// settle marks the session settled when the answer at idx, just returned, was the last
// position taken and the one its request's history showed (assistants messages).
func (m *Scripted) settle(req Request, idx, assistants int) {
	if req.SessionID == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.session(req.SessionID); st != nil && st.next == idx+1 && idx == assistants {
		st.settled = true
	}
}

// unclaim gives back the position a cancelled request took, unless a later request of the
// session has taken one since.
func (m *Scripted) unclaim(req Request, idx int) {
	if req.SessionID == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.session(req.SessionID); st != nil && st.next == idx+1 {
		st.next = idx
	}
}

// giveBack records that the answer at idx, to a request whose history held assistants
// assistant messages, was not stored, unless a later request of the session has taken a
// position since. A session forgotten since needs no record: its next request's history
// positions it at idx again.
func (m *Scripted) giveBack(req Request, idx, assistants int) {
	if req.SessionID == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.session(req.SessionID); st != nil && st.next == idx+1 {
		st.returned = &returnedAnswer{idx: idx, assistants: assistants}
		st.settled = false
	}
}

// session returns the state of session id, or nil if the value does not know it (or forgot
// it). The caller holds m.mu.
func (m *Scripted) session(id string) *scriptedSession {
	if st, ok := m.recent[id]; ok {
		return st
	}
	st, ok := m.older[id]
	if ok {
		delete(m.older, id)
		m.add(id, st)
	}
	return st
}

// add keeps the state of a session the value did not hold in recent, starting a new
// generation when recent is full. The caller holds m.mu.
func (m *Scripted) add(id string, st *scriptedSession) {
	kept := m.kept
	if kept <= 0 {
		kept = keptSessions
	}
	if m.added >= kept {
		next := make(map[string]*scriptedSession, kept)
		for oid, ost := range m.older {
			if !ost.settled {
				next[oid] = ost
			}
		}
		m.older, m.recent, m.added = m.recent, next, 0
	}
	if m.recent == nil {
		m.recent = make(map[string]*scriptedSession)
	}
	m.recent[id] = st
	m.added++
}

func assistantCount(msgs []Message) int {
	n := 0
	for _, msg := range msgs {
		if msg.Role == RoleAssistant {
			n++
		}
	}
	return n
}

// streamText sends text to onText in the given number of pieces (split by runes as evenly as
// possible, never empty), waiting before each piece so the waits add up to delay. Without
// text it waits the whole delay once. Cancellation during a wait returns ctx.Err().
func streamText(ctx context.Context, text string, chunks int, delay time.Duration, onText func(string)) error {
	pieces := splitRunes(text, max(chunks, 1))
	if len(pieces) == 0 {
		return sleep(ctx, delay)
	}
	var waited time.Duration
	for i, p := range pieces {
		// Cumulative targets keep the total exact whatever the rounding of each step.
		target := delay * time.Duration(i+1) / time.Duration(len(pieces))
		if err := sleep(ctx, target-waited); err != nil {
			return err
		}
		waited = target
		if onText != nil {
			onText(p)
		}
	}
	return nil
}

// splitRunes cuts s into min(n, rune count) pieces whose rune counts differ by at most one,
// the longer ones first.
func splitRunes(s string, n int) []string {
	total := utf8.RuneCountInString(s)
	if total == 0 {
		return nil
	}
	n = min(n, total)
	pieces := make([]string, 0, n)
	base, extra := total/n, total%n
	start := 0
	for i := range n {
		size := base
		if i < extra {
			size++
		}
		end := start
		for range size {
			_, w := utf8.DecodeRuneInString(s[end:])
			end += w
		}
		pieces = append(pieces, s[start:end])
		start = end
	}
	return pieces
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func requestRunes(req Request) int {
	n := utf8.RuneCountInString(req.System)
	for _, msg := range req.Messages {
		for _, b := range msg.Content {
			n += utf8.RuneCountInString(b.Text) + utf8.RuneCountInString(b.Name) + utf8.RuneCount(b.Input)
		}
	}
	return n
}

// estimateTokens is the scripted model's token estimate: a quarter of the runes, rounded up.
func estimateTokens(runes int) int64 { return int64(runes+3) / 4 }
