package app

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.uber.org/zap"
)

// MetricsPath is where ServeMetrics answers Prometheus scrapes.
const MetricsPath = "/metrics"

// metricsInterval is how often the SDK's metrics reach the Prometheus registry.
const metricsInterval = time.Second

// Metrics exports the Temporal SDK's metrics (temporal_request_total,
// temporal_activity_execution_latency_seconds, …) for Prometheus, the way Temporal's Go
// samples do: a tally scope with Prometheus naming over a Prometheus reporter. Set Handler as
// client.Options.MetricsHandler of the worker's client.
type Metrics struct {
	handler client.MetricsHandler
	scope   io.Closer
	srv     *httpServer
}

// ServeMetrics listens on addr ("127.0.0.1:9090"; port 0 picks a free one) and serves the
// metrics on MetricsPath until Close. Registration problems are logged to log, never fatal.
func ServeMetrics(addr string, log *zap.Logger) (*Metrics, error) {
	if log == nil {
		log = zap.NewNop()
	}
	registry := prom.NewRegistry()
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       registry,
		DefaultTimerType: tallyprom.HistogramTimerType,
		OnRegisterError: func(err error) {
			log.Warn("register metric", zap.Error(err))
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, metricsInterval)

	mux := http.NewServeMux()
	mux.Handle(MetricsPath, reporter.HTTPHandler())
	srv, err := serveHTTP("metrics", addr, mux)
	if err != nil {
		_ = closer.Close()
		return nil, err
	}
	return &Metrics{
		handler: sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)),
		scope:   closer,
		srv:     srv,
	}, nil
}

// Handler is the client.Options.MetricsHandler that feeds the export.
func (m *Metrics) Handler() client.MetricsHandler { return m.handler }

// Addr is the address the export listens on, with the port resolved.
func (m *Metrics) Addr() string { return m.srv.addr }

// Close stops the HTTP server and the scope's reporting loop.
func (m *Metrics) Close() error {
	err := m.srv.close()
	if scopeErr := m.scope.Close(); scopeErr != nil {
		err = errors.Join(err, fmt.Errorf("app: close metrics scope: %w", scopeErr))
	}
	return err
}
