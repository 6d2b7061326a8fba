package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closers closes each of its members, as Options.Closer.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// connPair returns two started Conns wired to each other with io.Pipe.
// configure registers handlers before Start.
func connPair(t *testing.T, opts Options, configureServer func(*Conn), configureClient func(*Conn)) (client, server *Conn) {
	t.Helper()
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	copts, sopts := opts, opts
	copts.Closer = closers{c2sW, s2cR}
	sopts.Closer = closers{s2cW, c2sR}
	client = NewConn(s2cR, c2sW, copts)
	server = NewConn(c2sR, s2cW, sopts)
	if configureServer != nil {
		configureServer(server)
	}
	if configureClient != nil {
		configureClient(client)
	}
	client.Start()
	server.Start()
	t.Cleanup(func() {
		client.Close()
		server.Close()
		<-client.Done()
		<-server.Done()
	})
	return client, server
}

// rawPeer is a client Conn whose peer is driven by the test line by line.
type rawPeer struct {
	conn *Conn
	in   *bufio.Reader  // frames the Conn wrote
	out  *io.PipeWriter // frames for the Conn to read
}

func newRawPeer(t *testing.T, opts Options) *rawPeer {
	t.Helper()
	toConnR, toConnW := io.Pipe()
	fromConnR, fromConnW := io.Pipe()
	opts.Closer = closers{fromConnW, toConnR}
	conn := NewConn(toConnR, fromConnW, opts)
	p := &rawPeer{conn: conn, in: bufio.NewReader(fromConnR), out: toConnW}
	t.Cleanup(func() {
		conn.Close()
		toConnW.Close()
		fromConnR.Close()
		<-conn.Done()
	})
	return p
}

func (p *rawPeer) readFrame(t *testing.T) *Message {
	t.Helper()
	line, err := p.in.ReadBytes('\n')
	require.NoError(t, err)
	var m Message
	require.NoError(t, json.Unmarshal(line, &m), "frame %q", line)
	return &m
}

func (p *rawPeer) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		_, err := io.WriteString(p.out, l)
		require.NoError(t, err)
	}
}

// callAsync runs Call in a goroutine and returns its outcome on a channel.
func callAsync(ctx context.Context, c *Conn, method string, params, result any) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.Call(ctx, method, params, result) }()
	return ch
}

func echo(_ context.Context, params json.RawMessage) (any, error) { return params, nil }

func TestCallRoundTrip(t *testing.T) {
	type initParams struct {
		Cwd   string `json:"cwd"`
		Model string `json:"model"`
	}
	notified := make(chan string, 2)
	client, server := connPair(t, Options{},
		func(s *Conn) {
			s.Handle("initialize", func(_ context.Context, params json.RawMessage) (any, error) {
				var p initParams
				if err := json.Unmarshal(params, &p); err != nil {
					return nil, err
				}
				return map[string]any{"serverInfo": map[string]string{"name": "rt", "version": p.Model}}, nil
			})
			s.OnNotify(func(method string, params json.RawMessage) { notified <- "server got " + method + string(params) })
		},
		func(c *Conn) {
			c.OnNotify(func(method string, params json.RawMessage) { notified <- "client got " + method + string(params) })
		})

	var res struct {
		ServerInfo struct{ Name, Version string }
	}
	require.NoError(t, client.Call(context.Background(), "initialize", initParams{Cwd: "/w", Model: "m1"}, &res))
	assert.Equal(t, "rt", res.ServerInfo.Name)
	assert.Equal(t, "m1", res.ServerInfo.Version)

	require.NoError(t, client.Notify("ping", map[string]int{"n": 1}))
	assert.Equal(t, `server got ping{"n":1}`, <-notified)
	require.NoError(t, server.Notify("session.status", nil))
	assert.Equal(t, "client got session.status", <-notified, "nil params are omitted")

	// The server side can call the client too: the protocol is symmetric.
	client.Handle("echo", echo)
	var back []int
	require.NoError(t, server.Call(context.Background(), "echo", []int{1, 2}, &back))
	assert.Equal(t, []int{1, 2}, back)
}

func TestServerEchoesIDsOfEitherType(t *testing.T) {
	p := newRawPeer(t, Options{})
	p.conn.Handle("echo", echo)
	p.conn.Start()

	p.send(t, `{"jsonrpc":"2.0","id":"req-abc","method":"echo","params":{"a":1}}`+"\n")
	m := p.readFrame(t)
	assert.Equal(t, json.RawMessage(`"req-abc"`), m.ID)
	assert.JSONEq(t, `{"a":1}`, string(m.Result))

	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"echo","params":[true]}`+"\n")
	m = p.readFrame(t)
	assert.Equal(t, json.RawMessage(`7`), m.ID)
	assert.JSONEq(t, `[true]`, string(m.Result))
}

func TestClientSendsNumericIDsAndMatchesResponses(t *testing.T) {
	p := newRawPeer(t, Options{})
	p.conn.Start()
	done := callAsync(context.Background(), p.conn, "m", nil, nil)
	req := p.readFrame(t)
	assert.Equal(t, KindRequest, req.Kind())
	assert.Equal(t, Version, req.JSONRPC)
	assert.Nil(t, req.Params)
	var n int64
	require.NoError(t, json.Unmarshal(req.ID, &n), "ids are JSON numbers")
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", req.ID))
	require.NoError(t, <-done)
}

func TestUnknownMethod(t *testing.T) {
	client, _ := connPair(t, Options{}, nil, nil)
	err := client.Call(context.Background(), "session/cancel", map[string]string{}, nil)
	var werr *Error
	require.ErrorAs(t, err, &werr)
	assert.Equal(t, CodeMethodNotFound, werr.Code)
	assert.Equal(t, "method not found: session/cancel", werr.Message)
	assert.EqualError(t, err, "method not found: session/cancel")
}

func TestHandlerError(t *testing.T) {
	client, _ := connPair(t, Options{}, func(s *Conn) {
		s.Handle("initialize", func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("initialize maxTokens must be a positive safe integer")
		})
		s.Handle("typed", func(context.Context, json.RawMessage) (any, error) {
			return nil, fmt.Errorf("wrapped: %w", &Error{Code: -32602, Message: "bad params", Data: json.RawMessage(`{"field":"cwd"}`)})
		})
	}, nil)

	err := client.Call(context.Background(), "initialize", nil, nil)
	var werr *Error
	require.ErrorAs(t, err, &werr)
	assert.Equal(t, CodeInternalError, werr.Code)
	assert.EqualError(t, err, "initialize maxTokens must be a positive safe integer")

	err = client.Call(context.Background(), "typed", nil, nil)
	require.ErrorAs(t, err, &werr)
	assert.Equal(t, -32602, werr.Code, "a handler's *Error is sent as is")
	assert.Equal(t, "bad params", werr.Message)
	assert.JSONEq(t, `{"field":"cwd"}`, string(werr.Data))
}

func TestGarbageLinesAreIgnored(t *testing.T) {
	var mu sync.Mutex
	var discarded []string
	p := newRawPeer(t, Options{OnDiscard: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		discarded = append(discarded, err.Error())
	}})
	notes := make(chan string, 1)
	p.conn.OnNotify(func(method string, _ json.RawMessage) { notes <- method })
	p.conn.Start()

	var res struct{ OK bool }
	done := callAsync(context.Background(), p.conn, "m", nil, &res)
	req := p.readFrame(t)
	p.send(t,
		"not json\n", "[1,2]\n", "42\n", "\"str\"\n", "\n", "  \n", "\r\n", "{\"half\":\n",
		`{"jsonrpc":"2.0","method":"session.status","params":{"status":"idle"}}`+"\r\n",
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`+"\r\n", req.ID),
	)
	require.NoError(t, <-done)
	assert.True(t, res.OK)
	assert.Equal(t, "session.status", <-notes)

	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, discarded, 5, "each non-blank garbage line is reported: %q", discarded)
}

func TestUnknownResponseIDIsIgnored(t *testing.T) {
	p := newRawPeer(t, Options{})
	p.conn.Start()
	var got string
	done := callAsync(context.Background(), p.conn, "m", nil, &got)
	req := p.readFrame(t)
	p.send(t,
		`{"jsonrpc":"2.0","id":99999,"result":"wrong"}`+"\n",
		`{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"wrong"}}`+"\n",
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"right"}`+"\n", req.ID),
	)
	require.NoError(t, <-done)
	assert.Equal(t, "right", got)
}

func TestEOFFailsPendingCalls(t *testing.T) {
	p := newRawPeer(t, Options{})
	p.conn.Start()
	done := callAsync(context.Background(), p.conn, "session/prompt", nil, nil)
	p.readFrame(t)
	require.NoError(t, p.out.Close())

	err := <-done
	assert.ErrorIs(t, err, ErrInputClosed)
	assert.EqualError(t, err, "JSON-RPC input closed")
	<-p.conn.Done()
	assert.ErrorIs(t, p.conn.Err(), ErrInputClosed)
	assert.EqualError(t, p.conn.Call(context.Background(), "later", nil, nil), "JSON-RPC input closed")
}

func TestReadErrorFailsPendingCallsAsInputClosed(t *testing.T) {
	p := newRawPeer(t, Options{})
	p.conn.Start()
	done := callAsync(context.Background(), p.conn, "m", nil, nil)
	p.readFrame(t)
	boom := errors.New("pipe broke")
	require.NoError(t, p.out.CloseWithError(boom))

	assert.EqualError(t, <-done, "JSON-RPC input closed")
	<-p.conn.Done()
	assert.ErrorIs(t, p.conn.Err(), ErrInputClosed)
	assert.ErrorIs(t, p.conn.Err(), boom, "Err keeps the read error for diagnostics")
}

func TestCloseFailsPendingCalls(t *testing.T) {
	p := newRawPeer(t, Options{})
	p.conn.Start()
	done := callAsync(context.Background(), p.conn, "shutdown", nil, nil)
	p.readFrame(t)
	require.NoError(t, p.conn.Close())

	err := <-done
	assert.ErrorIs(t, err, ErrTransportClosed)
	assert.EqualError(t, err, "JSON-RPC transport closed")
	assert.EqualError(t, p.conn.Call(context.Background(), "later", nil, nil), "JSON-RPC transport closed")
	assert.ErrorIs(t, p.conn.Notify("later", nil), ErrTransportClosed)
	require.NoError(t, p.conn.Close(), "Close is idempotent")

	<-p.conn.Done() // the Closer closed the reader too
	assert.ErrorIs(t, p.conn.Err(), ErrTransportClosed)
}

func TestCloseCancelsHandlerContext(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan error, 1)
	client, server := connPair(t, Options{}, func(s *Conn) {
		s.Handle("wait", func(ctx context.Context, _ json.RawMessage) (any, error) {
			close(started)
			<-ctx.Done()
			ended <- ctx.Err()
			return nil, ctx.Err()
		})
	}, nil)
	callAsync(context.Background(), client, "wait", nil, nil)
	<-started
	require.NoError(t, server.Close())
	assert.ErrorIs(t, <-ended, context.Canceled)
}

func TestCallContextCancelAbandonsWait(t *testing.T) {
	p := newRawPeer(t, Options{})
	p.conn.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := callAsync(ctx, p.conn, "slow", nil, nil)
	req := p.readFrame(t)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)

	// The late response is ignored and the connection stays usable.
	var got string
	done = callAsync(context.Background(), p.conn, "next", nil, &got)
	next := p.readFrame(t)
	p.send(t,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"late"}`+"\n", req.ID),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"next"}`+"\n", next.ID),
	)
	require.NoError(t, <-done)
	assert.Equal(t, "next", got)

	assert.ErrorIs(t, p.conn.Call(ctx, "never-sent", nil, nil), context.Canceled)
}

func TestSlowHandlerDoesNotBlockReading(t *testing.T) {
	release := make(chan struct{})
	client, _ := connPair(t, Options{}, func(s *Conn) {
		s.Handle("slow", func(context.Context, json.RawMessage) (any, error) {
			<-release
			return "slow", nil
		})
		s.Handle("fast", func(context.Context, json.RawMessage) (any, error) { return "fast", nil })
	}, nil)

	var slow, fast string
	slowDone := callAsync(context.Background(), client, "slow", nil, &slow)
	require.NoError(t, client.Call(context.Background(), "fast", nil, &fast))
	assert.Equal(t, "fast", fast)
	close(release)
	require.NoError(t, <-slowDone)
	assert.Equal(t, "slow", slow)
}

func TestNotificationOrderUnderLoad(t *testing.T) {
	const events = 5000
	var got []int
	all := make(chan struct{})
	client, server := connPair(t, Options{}, func(s *Conn) {
		s.Handle("echo", echo)
	}, func(c *Conn) {
		c.OnNotify(func(method string, params json.RawMessage) {
			var p struct{ Seq int }
			if method != "session.event" || json.Unmarshal(params, &p) != nil {
				return
			}
			got = append(got, p.Seq)
			if len(got) == events {
				close(all)
			}
		})
	})

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 50 {
				var n int
				assert.NoError(t, client.Call(context.Background(), "echo", i, &n))
				assert.Equal(t, i, n)
			}
		})
	}
	for i := range events {
		require.NoError(t, server.Notify("session.event", map[string]int{"seq": i}))
	}
	wg.Wait()
	<-all
	for i, seq := range got {
		require.Equal(t, i, seq, "notifications arrive in the order sent")
	}
}

func TestConcurrentCalls(t *testing.T) {
	client, _ := connPair(t, Options{}, func(s *Conn) { s.Handle("echo", echo) }, nil)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				want := fmt.Sprintf("g%d-%d", g, i)
				var got string
				if assert.NoError(t, client.Call(context.Background(), "echo", want, &got)) {
					assert.Equal(t, want, got)
				}
			}
		})
	}
	wg.Wait()
}

func TestLargeFrameUnderLimitIsDelivered(t *testing.T) {
	big := strings.Repeat("é", 5<<20/2) // 5 MiB of two-byte runes
	var got string
	client, _ := connPair(t, Options{MaxFrameSize: 8 << 20}, func(s *Conn) { s.Handle("echo", echo) }, nil)
	require.NoError(t, client.Call(context.Background(), "echo", big, &got))
	assert.Equal(t, big, got)
}

func TestOversizedFrameIsSkippedAndTheConnContinues(t *testing.T) {
	var mu sync.Mutex
	var discarded []error
	p := newRawPeer(t, Options{MaxFrameSize: 1 << 10, OnDiscard: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		discarded = append(discarded, err)
	}})
	p.conn.Start()
	var got string
	done := callAsync(context.Background(), p.conn, "m", nil, &got)
	req := p.readFrame(t)
	p.send(t,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"%s"}`+"\n", req.ID, strings.Repeat("a", 4<<10)),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"small"}`+"\n", req.ID),
	)
	require.NoError(t, <-done)
	assert.Equal(t, "small", got)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, discarded, 1)
	assert.ErrorIs(t, discarded[0], ErrFrameTooLarge)
}
