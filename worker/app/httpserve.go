package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// httpServer is an HTTP server on a listener of its own, for the worker's side doors
// (metrics, profiles): it serves until close.
type httpServer struct {
	what   string
	srv    *http.Server
	addr   string
	served chan error
}

// serveHTTP listens on addr (port 0 picks a free one) and serves h there; what names the
// server in errors.
func serveHTTP(what, addr string, h http.Handler) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("app: %s listen %s: %w", what, addr, err)
	}
	s := &httpServer{
		what:   what,
		srv:    &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		addr:   ln.Addr().String(),
		served: make(chan error, 1),
	}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// close stops the server, waiting up to 5 s for requests in flight.
func (s *httpServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("app: close %s on %s: %w", s.what, s.addr, err)
	}
	return nil
}
