package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeAll decodes r to its end and returns the messages and the final error.
func decodeAll(t *testing.T, r io.Reader, opts DecoderOptions) ([]*Message, error) {
	t.Helper()
	dec := NewDecoder(r, opts)
	var msgs []*Message
	for {
		m, err := dec.Decode()
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

func TestDecodeClassifiesMessages(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1}}
{"jsonrpc":"2.0","id":"s-1","result":null}
{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"method not found: a"}}
{"jsonrpc":"2.0","method":"n","params":[1]}
`
	msgs, err := decodeAll(t, strings.NewReader(in), DecoderOptions{})
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, msgs, 4)

	assert.Equal(t, KindRequest, msgs[0].Kind())
	assert.Equal(t, json.RawMessage(`1`), msgs[0].ID)
	assert.JSONEq(t, `{"x":1}`, string(msgs[0].Params))

	assert.Equal(t, KindResponse, msgs[1].Kind())
	assert.Equal(t, json.RawMessage(`"s-1"`), msgs[1].ID)
	assert.Equal(t, json.RawMessage(`null`), msgs[1].Result, "a null result is present, not absent")

	assert.Equal(t, KindResponse, msgs[2].Kind())
	assert.Equal(t, &Error{Code: CodeMethodNotFound, Message: "method not found: a"}, msgs[2].Error)

	assert.Equal(t, KindNotification, msgs[3].Kind())
	assert.Nil(t, msgs[3].ID)
}

func TestDecodeIgnoresGarbageLines(t *testing.T) {
	in := "not json\n[1,2]\n42\n\"str\"\n\n   \n\r\n{}\n{\"id\":1\n{\"a\":1} trailing\n" +
		"{\"jsonrpc\":\"2.0\",\"method\":\"ok\"}\r\n" +
		"null\ntrue\n" +
		"{\"jsonrpc\":\"2.0\",\"method\":\"ok2\"}\n"
	var discarded []error
	msgs, err := decodeAll(t, strings.NewReader(in), DecoderOptions{OnDiscard: func(err error) { discarded = append(discarded, err) }})
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, msgs, 2)
	assert.Equal(t, "ok", msgs[0].Method)
	assert.Equal(t, "ok2", msgs[1].Method)
	// Every non-blank garbage line is reported; blank lines are not.
	assert.Len(t, discarded, 9)
	assert.Contains(t, discarded[0].Error(), `"not json"`)
}

func TestDecodeFinalLineWithoutNewline(t *testing.T) {
	msgs, err := decodeAll(t, strings.NewReader(`{"method":"a"}`+"\n"+`{"method":"b"}`), DecoderOptions{})
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, msgs, 2)
	assert.Equal(t, "b", msgs[1].Method)
}

func TestDecodeReturnsReadErrorAfterPendingFrame(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader(`{"method":"a"}`), iotest.ErrReader(boom))
	msgs, err := decodeAll(t, r, DecoderOptions{})
	require.ErrorIs(t, err, boom)
	require.Len(t, msgs, 1)
}

func TestDecodeUTF8SplitAcrossReads(t *testing.T) {
	text := "héllo 世界 🎉 ñ"
	frame, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "t", "params": map[string]string{"text": text}})
	require.NoError(t, err)
	r := iotest.OneByteReader(bytes.NewReader(append(frame, '\n')))
	msgs, err := decodeAll(t, r, DecoderOptions{})
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, msgs, 1)
	var p struct{ Text string }
	require.NoError(t, json.Unmarshal(msgs[0].Params, &p))
	assert.Equal(t, text, p.Text)
}

// repeatReader yields n copies of b without holding them in memory.
type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), r.n)]
	for i := range p {
		p[i] = r.b
	}
	r.n -= len(p)
	return len(p), nil
}

func TestDecodeDiscardsOversizedLineWithBoundedMemory(t *testing.T) {
	const lineSize = 10 << 20
	const limit = 1 << 20
	r := io.MultiReader(
		strings.NewReader(`{"jsonrpc":"2.0","method":"huge","params":"`),
		&repeatReader{b: 'a', n: lineSize},
		strings.NewReader("\"}\n"+`{"jsonrpc":"2.0","method":"after"}`+"\n"),
	)
	var discarded []error
	dec := NewDecoder(r, DecoderOptions{MaxFrameSize: limit, OnDiscard: func(err error) { discarded = append(discarded, err) }})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := dec.Decode()
	runtime.ReadMemStats(&after)

	require.NoError(t, err)
	assert.Equal(t, "after", m.Method, "reading continues with the next line")
	require.Len(t, discarded, 1)
	assert.ErrorIs(t, discarded[0], ErrFrameTooLarge)

	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes while discarding a %d-byte line (max frame %d)", allocated, lineSize, limit)
	assert.Less(t, allocated, uint64(lineSize*3/10), "the oversized line must not be buffered")
	if after.HeapInuse > before.HeapInuse {
		assert.Less(t, after.HeapInuse-before.HeapInuse, uint64(lineSize*3/10))
	}

	_, err = dec.Decode()
	assert.ErrorIs(t, err, io.EOF)
}

func TestDecodeLargeFrameUnderLimit(t *testing.T) {
	big := strings.Repeat("x", 5<<20)
	frame := `{"jsonrpc":"2.0","method":"big","params":"` + big + `"}` + "\n" + `{"method":"next"}` + "\n"
	msgs, err := decodeAll(t, strings.NewReader(frame), DecoderOptions{MaxFrameSize: 8 << 20})
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, msgs, 2)
	assert.Equal(t, `"`+big+`"`, string(msgs[0].Params))
	assert.Equal(t, "next", msgs[1].Method)
}

func TestDecodeLimitCountsLineWithoutTerminator(t *testing.T) {
	frame := `{"method":"a"}` // 14 bytes
	msgs, err := decodeAll(t, strings.NewReader(frame+"\n"+frame+"x\n"), DecoderOptions{MaxFrameSize: len(frame)})
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, msgs, 1, "a line of exactly the maximum is accepted, one byte more is not")
}

// writeRecorder records every Write call separately.
type writeRecorder struct {
	mu     sync.Mutex
	writes [][]byte
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

func TestEncodeWritesOneCompactLinePerFrame(t *testing.T) {
	var w writeRecorder
	enc := NewEncoder(&w)
	params := json.RawMessage("{\n  \"text\": \"a\\nb\",\n  \"n\": [1,\n 2]\n}")
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			assert.NoError(t, enc.Encode(&Message{ID: json.RawMessage(`1`), Method: "m", Params: params}))
			assert.NoError(t, enc.Encode(&Message{Method: "n", Params: json.RawMessage(`{"i":` + string(rune('0'+i%10)) + `}`)}))
		})
	}
	wg.Wait()

	require.Len(t, w.writes, 40)
	for _, b := range w.writes {
		require.Equal(t, byte('\n'), b[len(b)-1])
		require.Equal(t, 1, bytes.Count(b, []byte("\n")), "one frame per line: %q", b)
		var m Message
		require.NoError(t, json.Unmarshal(b, &m))
		assert.Equal(t, Version, m.JSONRPC)
	}
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"method":"m","params":{"text":"a\nb","n":[1,2]}}`+"\n", findWrite(w.writes, `"method":"m"`))
}

func findWrite(writes [][]byte, sub string) string {
	for _, b := range writes {
		if bytes.Contains(b, []byte(sub)) {
			return string(b)
		}
	}
	return ""
}

func TestEncodeRejectsInvalidRawParams(t *testing.T) {
	var buf bytes.Buffer
	err := NewEncoder(&buf).Encode(&Message{Method: "m", Params: json.RawMessage(`{bad`)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "wire: encode notification m")
	assert.Zero(t, buf.Len(), "nothing is written for a frame that cannot be encoded")
}

var (
	fuzzMarker1 = `{"jsonrpc":"2.0","method":"fuzz.marker","params":{"n":1,"s":"é"}}`
	fuzzMarker2 = `{"jsonrpc":"2.0","id":"m2","result":{"n":2}}`
)

// FuzzDecode feeds garbage around two valid frames: decoding must never
// panic, must end with io.EOF, must only return classified messages, and
// must recover both frames in order whatever the garbage is.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"", "not json", "[1,2]\n42\n\"str\"", `{"id":1`, "\r\n\r\n", `{"method":"x"}`,
		`{"id":{"a":1},"method":7}`, "\xff\xfe\xfd", strings.Repeat("a", 600), "{}\n{\"id\":null}",
		`{"jsonrpc":"2.0","method":"fuzz.marker","params":{"n":1,"s":"é"}}`, "\"\\", "{\"a\":\"\n\"}",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, garbage []byte, oneByte bool) {
		var stream bytes.Buffer
		stream.Write(garbage)
		stream.WriteString("\n" + fuzzMarker1 + "\n")
		stream.Write(garbage)
		stream.WriteString("\n" + fuzzMarker2 + "\n")
		streamLen := stream.Len()
		var r io.Reader = &stream
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		dec := NewDecoder(r, DecoderOptions{MaxFrameSize: 256, OnDiscard: func(error) {}})
		found := 0
		for n := 0; ; n++ {
			m, err := dec.Decode()
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
				break
			}
			require.LessOrEqual(t, n, streamLen, "more messages than lines")
			require.NotEqual(t, KindInvalid, m.Kind())
			switch {
			case found == 0 && m.Method == "fuzz.marker" && string(m.Params) == `{"n":1,"s":"é"}`:
				found = 1
			case found == 1 && string(m.ID) == `"m2"` && string(m.Result) == `{"n":2}`:
				found = 2
			}
		}
		require.Equal(t, 2, found, "both valid frames recovered in order")
	})
}
