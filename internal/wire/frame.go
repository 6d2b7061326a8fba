package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxFrameSize is the longest line accepted when no maximum is set.
const DefaultMaxFrameSize = 16 << 20

const (
	readBufferSize = 64 << 10
	// retainBufferSize bounds the line buffer kept between frames, so one
	// large frame does not pin its memory for the life of the connection.
	retainBufferSize = 1 << 20
	snippetSize      = 64
)

// DecoderOptions configures a Decoder. The zero value is ready to use.
type DecoderOptions struct {
	// MaxFrameSize is the longest line accepted, not counting its line
	// terminator; longer lines are discarded while being read, without
	// being buffered. Zero or negative means DefaultMaxFrameSize.
	MaxFrameSize int

	// OnDiscard, if set, is called with a description of every non-blank
	// line that was ignored (not JSON, not an object, neither id nor
	// method, too long). It runs on the decoding goroutine.
	OnDiscard func(err error)

	// OnBadRequest, if set, is called (after OnDiscard) for every discarded line whose
	// top-level members make it a request (an id and a method) although it cannot be decoded:
	// longer than MaxFrameSize, nested deeper than encoding/json accepts, or not JSON past its
	// id. id is the request's id, or null when that id is longer than MaxIDBytes or not a
	// string or number; err says why. The peer answers with an error response, so a caller
	// waiting for the request's answer gets one. It runs on the decoding goroutine.
	OnBadRequest func(id json.RawMessage, err *Error)
}

// Decoder reads messages from a stream of newline-terminated lines.
// A Decoder is not safe for concurrent use.
type Decoder struct {
	r         *bufio.Reader
	max       int
	onDiscard func(error)
	onBad     func(json.RawMessage, *Error)
	scan      idScanner // of the line being read, once it outgrows the read buffer
	scanning  bool
	line      []byte
	err       error // sticky: the read error that ended the input
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader, opts DecoderOptions) *Decoder {
	limit := opts.MaxFrameSize
	if limit <= 0 {
		limit = DefaultMaxFrameSize
	}
	return &Decoder{r: bufio.NewReaderSize(r, readBufferSize), max: limit, onDiscard: opts.OnDiscard, onBad: opts.OnBadRequest}
}

// Decode returns the next message that is a JSON object with an id, a
// method or both, skipping every other line. A final line without a
// terminator is still decoded. At the end of input Decode returns io.EOF;
// a read error is returned as is.
func (d *Decoder) Decode() (*Message, error) {
	for d.err == nil {
		line, err := d.readLine()
		// An error that ends a final unterminated line is kept for the
		// next call, after that line's message has been returned.
		d.err = err
		if m := d.parse(line); m != nil {
			return m, nil
		}
	}
	return nil, d.err
}

// readLine returns the next line including its terminator, or nil for a line
// that was too long. The result is valid until the next call.
func (d *Decoder) readLine() ([]byte, error) {
	if cap(d.line) > retainBufferSize {
		d.line = nil
	}
	d.line = d.line[:0]
	d.scanning = false
	size := 0 // bytes of the line so far, terminator excluded
	for {
		chunk, err := d.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull && !d.scanning && d.onBad != nil {
			// A line longer than the read buffer may end up discarded unread: find its id
			// on the way, from its first byte.
			d.scan.reset()
			d.scanning = true
		}
		if d.scanning {
			d.scan.feed(chunk)
		}
		size += len(chunk)
		if err == nil {
			size-- // the '\n'
		}
		switch {
		case size > d.max:
			d.line = d.line[:0]
		case err == nil && len(d.line) == 0:
			return chunk, nil // the whole line is in the read buffer: no copy
		default:
			d.grow(len(chunk))
			d.line = append(d.line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if size > d.max {
			d.discard(fmt.Errorf("wire: discarded line of %d bytes: %w (max %d)", size, ErrFrameTooLarge, d.max))
			if !d.scanning {
				// The whole line came in one read: chunk is all of it.
				d.scan.reset()
				d.scan.feed(chunk)
				d.scanning = true
			}
			d.badRequest(nil, CodeInvalidRequest, fmt.Sprintf("request discarded: the frame is %d bytes, over the maximum of %d", size, d.max))
			return nil, err
		}
		return d.line, err
	}
}

// grow makes room for n more bytes, doubling but never beyond the largest
// line kept (max plus its '\n'), so discarding an oversized line allocates
// at most about twice the maximum frame size.
func (d *Decoder) grow(n int) {
	need := len(d.line) + n
	if need <= cap(d.line) {
		return
	}
	c := max(2*cap(d.line), need)
	if c > d.max {
		c = max(need, d.max)
	}
	line := make([]byte, len(d.line), c)
	copy(line, d.line)
	d.line = line
}

// parse returns the message in line, or nil (after reporting why) when the
// line is not one.
func (d *Decoder) parse(line []byte) *Message {
	line = bytes.TrimSpace(line) // also drops the '\r' of CRLF
	if len(line) == 0 {
		return nil
	}
	if line[0] != '{' {
		d.discard(fmt.Errorf("wire: ignored line that is not a JSON object: %s", snippet(line)))
		return nil
	}
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		d.discard(fmt.Errorf("wire: ignored line that is not a JSON-RPC message: %s: %v", snippet(line), err))
		d.badRequest(line, CodeParseError, fmt.Sprintf("request discarded: not a JSON-RPC message: %v", err))
		return nil
	}
	if m.Kind() == KindInvalid {
		d.discard(fmt.Errorf("wire: ignored object with neither id nor method: %s", snippet(line)))
		return nil
	}
	return &m
}

// badRequest reports a discarded request to OnBadRequest when the line's top-level members
// make it one: line is the whole line, or nil when it was scanned while read (too long).
func (d *Decoder) badRequest(line []byte, code int, msg string) {
	if d.onBad == nil {
		return
	}
	if line != nil && !d.scanning {
		d.scan.reset()
		d.scan.feed(line)
	}
	if id, ok := d.scan.request(); ok {
		d.onBad(id, &Error{Code: code, Message: msg})
	}
}

func (d *Decoder) discard(err error) {
	if d.onDiscard != nil {
		d.onDiscard(err)
	}
}

func snippet(line []byte) string {
	if len(line) > snippetSize {
		return fmt.Sprintf("%q...", line[:snippetSize])
	}
	return fmt.Sprintf("%q", line)
}

// Encoder writes messages as compact newline-terminated lines. It is safe
// for concurrent use: each frame is written with a single Write call while
// holding a lock, so frames never interleave.
type Encoder struct {
	mu sync.Mutex
	w  io.Writer
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder {
	return &Encoder{w: w}
}

// Encode writes m as one line, setting its "jsonrpc" member to Version.
// Raw members are compacted, so a frame never spans lines.
func (e *Encoder) Encode(m *Message) error {
	msg := *m
	msg.JSONRPC = Version
	b, err := json.Marshal(&msg)
	if err != nil {
		return fmt.Errorf("wire: encode %s: %w", describe(m), err)
	}
	b = append(b, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("wire: write %s: %w", describe(m), err)
	}
	return nil
}

func describe(m *Message) string {
	switch m.Kind() {
	case KindRequest:
		return fmt.Sprintf("request %s (id %s)", m.Method, m.ID)
	case KindResponse:
		return fmt.Sprintf("response (id %s)", m.ID)
	case KindNotification:
		return "notification " + m.Method
	}
	return "message"
}
