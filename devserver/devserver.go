// Package devserver runs a single-process Temporal server on SQLite, with the Temporal Web UI,
// for `starter dev`, `starter demo` and end-to-end tests. It is the approach of the Temporal
// CLI's `temporal server start-dev`, reduced to what subflow needs, and registers the custom
// search attributes of contract R-75 in its namespace.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NoUI as Options.UIPort starts the server without the Web UI.
const NoUI = -1

// readyTimeout bounds Start when its context has no earlier deadline: a server that is not
// serving by then will not be.
const readyTimeout = time.Minute

// Options configures Start. The zero value is an in-memory server on free ports with the UI.
type Options struct {
	// IP is the address the frontend (gRPC and HTTP) and the UI bind. Default 127.0.0.1.
	// The internal services always bind 127.0.0.1.
	IP string
	// Port is the frontend gRPC port; 0 picks a free one.
	Port int
	// UIPort is the Web UI port; 0 picks a free one and NoUI disables the UI.
	UIPort int
	// DBFile persists the server in this SQLite file, created with its schema if absent; its
	// directory must exist. The file keeps a write-ahead log beside it (DBFile-wal and
	// DBFile-shm), synced at every commit. Empty keeps everything in memory for the life of
	// the process.
	DBFile string
	// Namespace is registered at start, with SearchAttributes. Default "default".
	Namespace string
	// LogLevel is the server's log level: debug, info, warn or error. Default warn.
	LogLevel string
	// LogWriter receives the server's logs. Default os.Stderr.
	LogWriter io.Writer
	// Logger, when set, receives the server's logs instead; LogLevel and LogWriter are ignored.
	Logger *zap.Logger
	// TLS, when set, serves the frontend over TLS, with client certificates required when it
	// names a client CA (docs/auth.md). Nil serves plain gRPC.
	TLS *TLS
}

// Server is a running dev server. Its methods are safe for concurrent use.
type Server struct {
	frontendAddr string
	uiAddr       string
	namespace    string
	logger       serverlog.Logger
	logGate      zap.AtomicLevel
	temporal     temporal.Server
	ui           *uiServer
	dbLock       *os.File   // held while the server runs on Options.DBFile (lockDB)
	tls          *serverTLS // nil without TLS

	stopOnce sync.Once
	stopErr  error
}

// Start starts a server and returns once its frontend serves opts.Namespace with every entry
// of SearchAttributes registered and the UI, if any, answers HTTP. ctx bounds that wait (at
// most a minute); it does not bound the server's life, which ends with Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := opts.applyDefaults(); err != nil {
		return nil, err
	}
	zl, logGate, err := newZapLogger(opts)
	if err != nil {
		return nil, err
	}
	logger := serverlog.NewZapLogger(zl)

	stls, err := loadTLS(opts.TLS, opts.IP)
	if err != nil {
		return nil, err
	}
	p, err := pickPorts(opts)
	if err != nil {
		return nil, err
	}
	ui, err := newUIServer(opts, p, stls)
	if err != nil {
		return nil, err
	}
	var dbLock *os.File
	if opts.DBFile != "" {
		if dbLock, err = lockDB(opts.DBFile); err != nil {
			return nil, err
		}
	}
	// Until the server is returned, a failure releases the lock.
	started := false
	defer func() {
		if !started && dbLock != nil {
			dbLock.Close()
		}
	}()
	sqlConf, err := prepareDB(opts)
	if err != nil {
		return nil, err
	}
	// The UI goes first: it only dials the frontend when a page asks, and a busy UI port
	// then fails Start before the slow part.
	if err := ui.start(ctx, logger); err != nil {
		return nil, err
	}
	ts, err := temporal.NewServer(
		temporal.WithConfig(serverConfig(opts, p, sqlConf, stls)),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(staticHosts(opts, p)),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dynamicConfig()),
	)
	if err != nil {
		ui.stop()
		return nil, fmt.Errorf("devserver: create server: %w", err)
	}
	if err := ts.Start(); err != nil {
		ui.stop()
		return nil, fmt.Errorf("devserver: start server on port %d: %w", p.frontend, err)
	}
	s := &Server{
		frontendAddr: net.JoinHostPort(dialHost(opts.IP), strconv.Itoa(p.frontend)),
		namespace:    opts.Namespace,
		logger:       logger,
		logGate:      logGate,
		temporal:     ts,
		ui:           ui,
		dbLock:       dbLock,
		tls:          stls,
	}
	if ui != nil {
		s.uiAddr = ui.url
	}
	started = true // s.Stop releases the lock from here on
	if err := s.ready(ctx); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

func (o *Options) applyDefaults() error {
	if o.IP == "" {
		o.IP = localhost
	}
	if net.ParseIP(o.IP) == nil {
		return fmt.Errorf("devserver: IP %q is not an IP address", o.IP)
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("devserver: port %d out of range", o.Port)
	}
	if o.UIPort < NoUI || o.UIPort > 65535 {
		return fmt.Errorf("devserver: UI port %d out of range", o.UIPort)
	}
	return nil
}

// ready waits for the frontend and makes sure the search attributes exist.
func (s *Server) ready(ctx context.Context) error {
	c, err := s.NewClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return ensureSearchAttributes(ctx, c, s.namespace)
}

// FrontendAddr is the host:port of the frontend gRPC API, for TEMPORAL_ADDRESS.
func (s *Server) FrontendAddr() string { return s.frontendAddr }

// UIAddr is the Web UI's base URL (http://host:port), or "" when the UI is disabled.
func (s *Server) UIAddr() string { return s.uiAddr }

// Namespace is the namespace Start registered.
func (s *Server) Namespace() string { return s.namespace }

// ClientOptions are client options for this server and its namespace, logging to the server's
// logger, without request compression (the server is on this host: gzip would only cost
// both ends CPU); callers may change them before client.Dial. With TLS they present the
// server's internal client certificate and trust exactly the server's certificate.
func (s *Server) ClientOptions() client.Options {
	opts := client.Options{
		HostPort:          s.frontendAddr,
		Namespace:         s.namespace,
		Logger:            serverlog.NewSdkLogger(s.logger),
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}},
	}
	if s.tls != nil {
		opts.ConnectionOptions.TLS = s.tls.clientConfig()
	}
	return opts
}

// NewClient dials a client with ClientOptions. The caller closes it.
func (s *Server) NewClient(ctx context.Context) (client.Client, error) {
	c, err := client.DialContext(ctx, s.ClientOptions())
	if err != nil {
		return nil, fmt.Errorf("devserver: dial %s: %w", s.frontendAddr, err)
	}
	return c, nil
}

// Stop stops the UI and the server and waits for them. Calls after the first return the
// first call's result. From the call on, the server's logger (shared with clients made from
// ClientOptions) drops everything below DPanic: shutdown makes every internal poller log a
// failure. Clients and workers should be closed first: the server does not wait for them.
// An in-memory database stays in the process's memory after Stop (the SQLite plugin never
// closes its shared connections).
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.logGate.SetLevel(zapcore.DPanicLevel)
		s.ui.stop()
		if err := s.temporal.Stop(); err != nil {
			s.stopErr = fmt.Errorf("devserver: stop server %s: %w", s.frontendAddr, err)
		}
		if s.dbLock != nil {
			s.dbLock.Close()
		}
	})
	return s.stopErr
}
