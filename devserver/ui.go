package devserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// uiServer is the Temporal Web UI served from the assets compiled into ui-server.
type uiServer struct {
	srv  *uiserver.Server
	host string // the IP it binds
	port int
	url  string
	done chan struct{} // nil until start runs srv.Start; closed when it returns
}

// newUIServer configures the UI for opts on p.ui, or returns nil with NoUI. It does not
// listen yet.
func newUIServer(opts Options, p ports, stls *serverTLS) (*uiServer, error) {
	if opts.UIPort == NoUI {
		return nil, nil
	}
	port, frontendPort := p.ui, p.frontend
	host := dialHost(opts.IP)
	var uiTLS uiconfig.TLS
	if stls != nil {
		b64 := base64.StdEncoding.EncodeToString
		uiTLS = uiconfig.TLS{
			CaData: b64(stls.leafPEM), CertData: b64(stls.clientPEM.cert), KeyData: b64(stls.clientPEM.key),
			ServerName: stls.serverName, EnableHostVerification: true,
		}
	}
	srv := uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		TLS:                 uiTLS,
		Host:                opts.IP,
		Port:                port,
		TemporalGRPCAddress: net.JoinHostPort(host, strconv.Itoa(frontendPort)),
		EnableUI:            true,
		DefaultNamespace:    opts.Namespace,
		// The UI is served over plain HTTP on loopback; a secure-only CSRF cookie would never
		// come back and every action in the UI would fail.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
	}))
	return &uiServer{
		srv:  srv,
		host: opts.IP,
		port: port,
		url:  "http://" + net.JoinHostPort(host, strconv.Itoa(port)),
	}, nil
}

// start serves the UI and waits until it answers its health check; on error the UI is
// stopped again. A nil u does nothing.
func (u *uiServer) start(ctx context.Context, logger serverlog.Logger) error {
	if u == nil {
		return nil
	}
	if err := checkFree(u.host, u.port); err != nil {
		return fmt.Errorf("devserver: UI: %w", err)
	}
	u.done = make(chan struct{})
	go func() {
		defer close(u.done)
		if err := u.srv.Start(); err != nil {
			logger.Error("Temporal UI server stopped", tag.Error(err))
		}
	}()

	probe := &http.Client{Timeout: time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url+"/healthz", nil)
	if err != nil {
		u.stop()
		return fmt.Errorf("devserver: UI health check %s: %w", u.url, err)
	}
	for {
		if resp, err := probe.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			u.stop()
			return fmt.Errorf("devserver: UI on %s not ready: %w", u.url, context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop closes the UI's listener and connections and waits for its Start to return.
// It must not run concurrently with start. A nil or unstarted u does nothing.
func (u *uiServer) stop() {
	if u == nil || u.done == nil {
		return
	}
	u.srv.Stop()
	<-u.done
}
