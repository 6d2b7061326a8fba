package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
)

// Handler answers a request. The returned value is marshalled as the
// result. A returned error becomes an error response: a *Error (possibly
// wrapped) is sent as is, any other error as code -32603 with the error's
// message. ctx is cancelled when the Conn is closed.
type Handler func(ctx context.Context, params json.RawMessage) (any, error)

// NotifyFunc receives notifications. It runs on the read loop, one call at
// a time in arrival order, so it must return promptly and must not wait
// for a Call on the same Conn (that response cannot be read meanwhile).
type NotifyFunc func(method string, params json.RawMessage)

// Options configures a Conn. The zero value is ready to use.
type Options struct {
	// MaxFrameSize and OnDiscard configure the decoder; see DecoderOptions.
	// OnDiscard also receives responses that could not be written.
	MaxFrameSize int
	OnDiscard    func(err error)

	// Closer, if set, is closed by Conn.Close: typically the peer's stdin,
	// so that the peer sees EOF.
	Closer io.Closer
}

// Conn is one end of a JSON-RPC connection: it sends calls and
// notifications and serves requests, over a reader and a writer.
// Its methods are safe for concurrent use.
type Conn struct {
	dec       *Decoder
	enc       *Encoder
	closer    io.Closer
	onDiscard func(error)
	nextID    atomic.Int64
	inFlight  InFlight // ids of the requests being served

	ctx    context.Context // passed to handlers; cancelled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	handlers  map[string]Handler
	onNotify  NotifyFunc
	pending   map[string]chan response
	inputDone bool
	closed    bool

	startOnce sync.Once
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
	err       error // why the read loop ended; written before done is closed
}

type response struct {
	msg *Message
	err error
}

// NewConn returns a Conn reading frames from r and writing them to w.
// Register handlers, then call Start.
func NewConn(r io.Reader, w io.Writer, opts Options) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		enc:       NewEncoder(w),
		closer:    opts.Closer,
		onDiscard: opts.OnDiscard,
		ctx:       ctx,
		cancel:    cancel,
		handlers:  make(map[string]Handler),
		pending:   make(map[string]chan response),
		done:      make(chan struct{}),
	}
	c.dec = NewDecoder(r, DecoderOptions{MaxFrameSize: opts.MaxFrameSize, OnDiscard: opts.OnDiscard, OnBadRequest: func(id json.RawMessage, werr *Error) { go c.answer(id, werr) }})
	return c
}

// Handle registers h for requests of method, replacing any earlier one.
// Requests without a handler get a -32601 "method not found: <method>"
// error. Register before Start so that no early request misses its handler.
func (c *Conn) Handle(method string, h Handler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers[method] = h
}

// OnNotify sets the function receiving every notification, replacing any
// earlier one. Without one, notifications are dropped. Set it before Start
// so that no early notification is lost.
func (c *Conn) OnNotify(f NotifyFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onNotify = f
}

// Start starts the read loop. Later calls do nothing.
func (c *Conn) Start() {
	c.startOnce.Do(func() { go c.readLoop() })
}

// Done is closed when the read loop has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err reports why the read loop ended: ErrInputClosed at end of input (it
// wraps the read error, if any), ErrTransportClosed after Close. It is nil
// until Done is closed.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Call sends a request and waits for its response, decoding the result into
// result unless result is nil or the response carries no result. An error
// response is returned as a *Error. If the input ends or the Conn is closed
// first, Call returns ErrInputClosed or ErrTransportClosed unwrapped. If ctx
// ends first, Call stops waiting and returns ctx's error; a response that
// arrives later is ignored.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("wire: call %s: %w", method, err)
	}
	raw, err := marshalParams(params)
	if err != nil {
		return fmt.Errorf("wire: call %s: encode params: %w", method, err)
	}
	id := json.RawMessage(strconv.AppendInt(nil, c.nextID.Add(1), 10))
	ch := make(chan response, 1)
	c.mu.Lock()
	if err := c.failureLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	c.pending[string(id)] = ch
	c.mu.Unlock()

	if err := c.enc.Encode(&Message{ID: id, Method: method, Params: raw}); err != nil {
		c.mu.Lock()
		delete(c.pending, string(id))
		ferr := c.failureLocked()
		c.mu.Unlock()
		if ferr != nil {
			return ferr
		}
		return fmt.Errorf("wire: call %s: %w", method, err)
	}

	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if r.msg.Error != nil {
			return r.msg.Error
		}
		if result != nil && len(r.msg.Result) > 0 {
			if err := json.Unmarshal(r.msg.Result, result); err != nil {
				return fmt.Errorf("wire: call %s: decode result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, string(id))
		c.mu.Unlock()
		return fmt.Errorf("wire: call %s: %w", method, ctx.Err())
	}
}

// Notify sends a notification. After Close it returns ErrTransportClosed.
func (c *Conn) Notify(method string, params any) error {
	raw, err := marshalParams(params)
	if err != nil {
		return fmt.Errorf("wire: notify %s: encode params: %w", method, err)
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrTransportClosed
	}
	return c.enc.Encode(&Message{Method: method, Params: raw})
}

// Close fails pending calls with ErrTransportClosed, cancels the handlers'
// context and closes Options.Closer. It does not wait for the read loop:
// that ends when the reader does (use Done). Close is idempotent and returns
// the Closer's error every time.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		pending := c.pending
		c.pending = make(map[string]chan response)
		c.mu.Unlock()
		for _, ch := range pending {
			ch <- response{err: ErrTransportClosed}
		}
		c.cancel()
		if c.closer != nil {
			if err := c.closer.Close(); err != nil {
				c.closeErr = fmt.Errorf("wire: close: %w", err)
			}
		}
	})
	return c.closeErr
}

// failureLocked returns the error a new call fails with, if any.
func (c *Conn) failureLocked() error {
	switch {
	case c.closed:
		return ErrTransportClosed
	case c.inputDone:
		return ErrInputClosed
	}
	return nil
}

func (c *Conn) readLoop() {
	defer close(c.done)
	for {
		m, err := c.dec.Decode()
		if err != nil {
			c.endInput(err)
			return
		}
		switch m.Kind() {
		case KindRequest:
			// Checked in reading order: of two requests with one id, the second is refused.
			if werr := c.inFlight.Begin(m.ID); werr != nil {
				go c.answer(m.ID, werr)
				continue
			}
			go c.serve(m)
		case KindResponse:
			c.deliver(m)
		case KindNotification:
			c.mu.Lock()
			f := c.onNotify
			c.mu.Unlock()
			if f != nil {
				f(m.Method, m.Params)
			}
		}
	}
}

func (c *Conn) endInput(readErr error) {
	c.mu.Lock()
	c.inputDone = true
	reason := ErrInputClosed
	if c.closed {
		reason = ErrTransportClosed
	}
	pending := c.pending
	c.pending = make(map[string]chan response)
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- response{err: reason}
	}
	if readErr == io.EOF || reason == ErrTransportClosed {
		c.err = reason
	} else {
		c.err = fmt.Errorf("%w: %w", reason, readErr)
	}
}

// deliver hands a response to its waiting call; responses to unknown or
// abandoned ids are ignored.
func (c *Conn) deliver(m *Message) {
	c.mu.Lock()
	ch, ok := c.pending[string(m.ID)]
	delete(c.pending, string(m.ID))
	c.mu.Unlock()
	if ok {
		ch <- response{msg: m}
	}
}

// serve runs in its own goroutine, so a slow handler does not stall the
// read loop and a blocked write cannot deadlock two peers' read loops.
func (c *Conn) serve(req *Message) {
	defer c.inFlight.End(req.ID)
	c.mu.Lock()
	h := c.handlers[req.Method]
	c.mu.Unlock()
	resp := &Message{ID: req.ID}
	if h == nil {
		resp.Error = &Error{Code: CodeMethodNotFound, Message: "method not found: " + req.Method}
	} else if result, err := h(c.ctx, req.Params); err != nil {
		resp.Error = toError(err)
	} else if raw, err := json.Marshal(result); err != nil {
		resp.Error = &Error{Code: CodeInternalError, Message: fmt.Sprintf("wire: encode result of %s: %v", req.Method, err)}
	} else {
		resp.Result = raw
	}
	if err := c.enc.Encode(resp); err != nil && c.onDiscard != nil {
		c.onDiscard(err)
	}
}

// answer writes an error response to a request that is not served: one that could not be
// read (DecoderOptions.OnBadRequest), or one whose id is in flight already.
func (c *Conn) answer(id json.RawMessage, werr *Error) {
	if err := c.enc.Encode(&Message{ID: id, Error: werr}); err != nil && c.onDiscard != nil {
		c.onDiscard(err)
	}
}

func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternalError, Message: err.Error()}
}

// marshalParams returns nil for nil params, so the member is omitted.
func marshalParams(params any) (json.RawMessage, error) {
	if params == nil {
		return nil, nil
	}
	return json.Marshal(params)
}
