package subflow

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	tclient "go.temporal.io/sdk/client"
)

// tlsProbeTimeout bounds the handshake Dial makes to explain a failed TLS connection.
const tlsProbeTimeout = 5 * time.Second

// Dial connects to Temporal like client.DialContext. When that fails over TLS, the error also
// says what a TLS handshake with the frontend reports: with TLS 1.3 a server refuses a client
// certificate only after the client finished its handshake, so the first request may fail
// with a bare "broken pipe" before the server's alert ("tls: unknown certificate authority")
// is read (docs/auth.md).
//
// When opts leave gRPC compression unset and the frontend's address is a loopback one, Dial
// sends requests uncompressed: the SDK gzips them by default, which on a server on the same
// host saves no network and costs both ends CPU, about 4 % of a batch's (docs/deployment.md).
func Dial(ctx context.Context, opts tclient.Options) (tclient.Client, error) {
	if opts.ConnectionOptions.GrpcCompression == nil && isLoopback(hostPort(opts)) {
		opts.ConnectionOptions.GrpcCompression = &tclient.GrpcCompressionNone{}
	}
	c, err := tclient.DialContext(ctx, opts)
	if err == nil {
		return c, nil
	}
	if cfg := opts.ConnectionOptions.TLS; cfg != nil {
		if terr := probeTLS(ctx, hostPort(opts), cfg); terr != nil {
			return nil, fmt.Errorf("%w (TLS handshake with %s: %v)", err, hostPort(opts), terr)
		}
	}
	return nil, err
}

func hostPort(opts tclient.Options) string {
	if opts.HostPort == "" {
		return tclient.DefaultHostPort
	}
	return opts.HostPort
}

// isLoopback reports whether addr (host:port) names this host by a loopback address.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// probeTLS completes a TLS handshake with addr and waits briefly for the server's verdict on
// the client certificate; it returns the handshake's or the server's error, nil when the
// server accepted the connection.
func probeTLS(ctx context.Context, addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, tlsProbeTimeout)
	defer cancel()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetReadDeadline(deadline)
	var b [1]byte
	_, err = conn.Read(b[:])
	var nerr net.Error
	if err == nil || (errors.As(err, &nerr) && nerr.Timeout()) {
		return nil // the server waits for the client's preface: it accepted the certificate
	}
	return err
}
