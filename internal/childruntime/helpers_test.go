package childruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/internal/wire"
)

// waitTimeout bounds every wait of the tests; it is a deadlock guard, not a speed assertion.
const waitTimeout = 20 * time.Second

// syncBuffer is a bytes.Buffer safe for the runtime's logger and the test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recvNote is a notification as the client saw it.
type recvNote struct {
	Method string
	Params json.RawMessage
}

// noteLog records the notifications a client receives, in order.
type noteLog struct {
	mu    sync.Mutex
	notes []recvNote
}

func (l *noteLog) add(method string, params json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, recvNote{Method: method, Params: append(json.RawMessage(nil), params...)})
}

func (l *noteLog) snapshot() []recvNote {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]recvNote(nil), l.notes...)
}

// sessionNote is one notification of a session: an event or a status.
type sessionNote struct {
	Status string // set for session.status
	Event  *session.Event
}

// forSession returns the session's events and statuses in arrival order.
func (l *noteLog) forSession(t *testing.T, id string) []sessionNote {
	t.Helper()
	var out []sessionNote
	for _, n := range l.snapshot() {
		switch n.Method {
		case wire.NotifySessionEvent:
			var p struct {
				SessionID string        `json:"sessionId"`
				Event     session.Event `json:"event"`
			}
			require.NoError(t, json.Unmarshal(n.Params, &p))
			if p.SessionID == id {
				out = append(out, sessionNote{Event: &p.Event})
			}
		case wire.NotifySessionStatus:
			var p wire.SessionStatusParams
			require.NoError(t, json.Unmarshal(n.Params, &p))
			if p.SessionID == id {
				out = append(out, sessionNote{Status: p.Status})
			}
		}
	}
	return out
}

// waitIdle waits for the session's idle status and returns its notes up to then.
func (l *noteLog) waitIdle(t *testing.T, id string) []sessionNote {
	t.Helper()
	var notes []sessionNote
	require.Eventually(t, func() bool {
		notes = l.forSession(t, id)
		for _, n := range notes {
			if n.Status == wire.StatusIdle {
				return true
			}
		}
		return false
	}, waitTimeout, 2*time.Millisecond, "no idle status for session %s", id)
	return notes
}

// waitEvent waits until the session has an event of type typ.
func (l *noteLog) waitEvent(t *testing.T, id, typ string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range l.forSession(t, id) {
			if n.Event != nil && n.Event.Type == typ {
				return true
			}
		}
		return false
	}, waitTimeout, 2*time.Millisecond, "no %s event for session %s", typ, id)
}

// runtime is a Run in this process with a wire.Conn client over two pipes.
type runtime struct {
	t   *testing.T
	cwd string
	// sessions is the runtime's session root, apart from the cwd.
	sessions string
	conn     *wire.Conn
	notes    *noteLog
	stderr   *syncBuffer
	stdin    *io.PipeWriter
	cancel   context.CancelFunc
	code     chan int
}

// startRuntime starts Run with a fresh working directory as cwd. mod may change the options.
func startRuntime(t *testing.T, mod ...func(*Options)) *runtime {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &runtime{t: t, cwd: t.TempDir(), sessions: t.TempDir(), notes: &noteLog{}, stderr: &syncBuffer{}, stdin: inW, code: make(chan int, 1)}
	opts := Options{In: inR, Out: outW, Err: r.stderr, Version: "test-version", SessionRoot: r.sessions}
	for _, m := range mod {
		m(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		code := Run(ctx, opts)
		_ = outW.Close() // as the process's exit would
		r.code <- code
	}()
	r.conn = wire.NewConn(outR, inW, wire.Options{Closer: inW})
	r.conn.OnNotify(r.notes.add)
	r.conn.Start()
	t.Cleanup(func() {
		cancel()
		_ = r.conn.Close()
		_ = inR.Close()
		select {
		case <-r.code:
		case <-time.After(waitTimeout):
			t.Error("Run did not return")
		}
	})
	return r
}

// wait returns Run's exit code once the client has also taken in everything Run wrote:
// frames read off the pipe are delivered on the client's read loop, which ends after the last.
func (r *runtime) wait() int {
	r.t.Helper()
	select {
	case code := <-r.code:
		r.code <- code // for Cleanup
		select {
		case <-r.conn.Done():
		case <-time.After(waitTimeout):
			r.t.Fatal("the client did not see the end of Run's output")
		}
		return code
	case <-time.After(waitTimeout):
		r.t.Fatal("Run did not return")
		return -1
	}
}

func (r *runtime) call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return r.conn.Call(ctx, method, params, result)
}

// initialize sends initialize routed to the scripted model with the given script file name.
func (r *runtime) initialize(script string) wire.InitializeResult {
	r.t.Helper()
	var res wire.InitializeResult
	require.NoError(r.t, r.call(wire.MethodInitialize, wire.InitializeParams{
		Cwd: r.cwd, Provider: "scripted", Model: script,
	}, &res))
	return res
}

// script writes a scripted-model script into the runtime's cwd and returns its name.
func (r *runtime) script(responses ...string) string {
	r.t.Helper()
	body := `{"responses": [` + strings.Join(responses, ",") + `]}`
	require.NoError(r.t, os.WriteFile(filepath.Join(r.cwd, "script.json"), []byte(body), 0o644))
	return "script.json"
}

// prompt sends session/prompt with one text block and returns the message id.
func (r *runtime) prompt(sessionID, text string) string {
	r.t.Helper()
	var res wire.PromptResult
	require.NoError(r.t, r.call(wire.MethodSessionPrompt, wire.PromptParams{
		SessionID: sessionID, ContentBlocks: []session.Block{session.Text(text)},
	}, &res))
	require.NotEmpty(r.t, res.MessageID)
	return res.MessageID
}

// rpcError returns err as the peer's *wire.Error.
func rpcError(t *testing.T, err error) *wire.Error {
	t.Helper()
	var we *wire.Error
	require.ErrorAs(t, err, &we)
	return we
}

// events returns the events among notes.
func events(notes []sessionNote) []session.Event {
	var out []session.Event
	for _, n := range notes {
		if n.Event != nil {
			out = append(out, *n.Event)
		}
	}
	return out
}

// lastTurnEnd decodes the last turn/end among events.
func lastTurnEnd(t *testing.T, evs []session.Event) session.TurnEndData {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == session.TypeTurnEnd {
			var d session.TurnEndData
			require.NoError(t, evs[i].Decode(&d))
			return d
		}
	}
	t.Fatal("no turn/end event")
	return session.TurnEndData{}
}
