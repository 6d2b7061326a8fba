package childruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subflow-dev/subflow/internal/wire"
)

// rawRuntime is a runtime driven with raw frames, to send what wire.Conn never would.
type rawRuntime struct {
	t   *testing.T
	cwd string
	in  *io.PipeWriter
	out *wire.Decoder
}

func startRawRuntime(t *testing.T) *rawRuntime {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &rawRuntime{t: t, cwd: t.TempDir(), in: inW, out: wire.NewDecoder(outR, wire.DecoderOptions{})}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, Options{In: inR, Out: outW, Err: io.Discard, SessionRoot: t.TempDir()})
		outW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		go io.Copy(io.Discard, outR) // let queued writes finish
		select {
		case <-code:
		case <-time.After(waitTimeout):
			t.Error("Run did not return")
		}
	})
	return r
}

// send writes frames in one write.
func (r *rawRuntime) send(frames ...[]byte) {
	r.t.Helper()
	go func() { _, _ = r.in.Write(bytes.Join(append(frames, nil), []byte("\n"))) }()
}

// response returns the next response, skipping notifications.
func (r *rawRuntime) response() *wire.Message {
	r.t.Helper()
	for {
		m, err := r.out.Decode()
		require.NoError(r.t, err)
		if m.Kind() == wire.KindResponse {
			return m
		}
	}
}

// A request the runtime cannot decode is still answered, with its id, whatever made it
// unreadable (docs/protocol.md): a frame over the 16 MiB limit, a nesting deeper than the
// JSON decoder accepts. An id too long to echo is answered with a null id.
func TestUnreadableRequestsAreAnswered(t *testing.T) {
	r := startRawRuntime(t)
	huge := strings.Repeat("x", wire.DefaultMaxFrameSize)
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	longID := `"` + strings.Repeat("i", wire.MaxIDBytes+1) + `"`
	for _, c := range []struct {
		frame string
		id    string
		code  int
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"pad":"` + huge + `"}}`, `7`, wire.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","method":"initialize","params":{"pad":"` + huge + `"},"id":"after"}`, `"after"`, wire.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":"deep","method":"session/prompt","params":` + deep + `}`, `"deep"`, wire.CodeParseError},
		{`{"jsonrpc":"2.0","id":` + longID + `,"method":"initialize","params":` + deep + `}`, `null`, wire.CodeParseError},
		{`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"a":1,}}`, `8`, wire.CodeParseError},
	} {
		r.send([]byte(c.frame))
		m := r.response()
		assert.JSONEq(t, c.id, string(m.ID))
		require.NotNil(t, m.Error, c.id)
		assert.Equal(t, c.code, m.Error.Code, m.Error.Message)
	}
	// Still serving: the next request gets its answer.
	r.send([]byte(`{"jsonrpc":"2.0","id":9,"method":"no/such"}`))
	m := r.response()
	assert.JSONEq(t, `9`, string(m.ID))
	assert.Equal(t, wire.CodeMethodNotFound, m.Error.Code)
}

// Two requests with one id: the second is refused while the first is in flight, and the
// first runs once. The first cannot end before its answer is read, so the order is sure.
func TestDuplicateInFlightIDIsRefused(t *testing.T) {
	r := startRawRuntime(t)
	script := `{"responses": [{"text": "once"}]}`
	require.NoError(t, os.WriteFile(filepath.Join(r.cwd, "script.json"), []byte(script), 0o644))
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"cwd":%q,"provider":"scripted","model":"script.json"}}`, r.cwd)
	r.send([]byte(init))
	require.Nil(t, r.response().Error)

	prompt := []byte(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","contentBlocks":[{"type":"text","text":"hi"}]}}`)
	r.send(prompt, prompt)
	var refused, served int
	for range 2 {
		m := r.response()
		assert.JSONEq(t, `2`, string(m.ID))
		if m.Error != nil {
			refused++
			assert.Equal(t, wire.CodeInvalidRequest, m.Error.Code)
			assert.Contains(t, m.Error.Message, "duplicate request id 2")
			continue
		}
		served++
		var res wire.PromptResult
		require.NoError(t, json.Unmarshal(m.Result, &res))
		assert.NotEmpty(t, res.MessageID)
	}
	assert.Equal(t, 1, refused)
	assert.Equal(t, 1, served)
}
