// Package telemetry sets up OpenTelemetry tracing for subflow's programs from the standard
// OTEL_* environment (docs/tracing.md) and holds the span helpers the agent loop uses for
// model requests and tool calls (GenAI semantic conventions). It knows nothing of Temporal:
// the Temporal side is package internal/telemetry/temporalotel.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set: then the global tracer provider stays OpenTelemetry's no-op one, every span helper
// below costs a few nanoseconds, and no interceptor is installed.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// The environment variables that decide whether and where spans are exported; the exporters
// read the rest of the OTEL_EXPORTER_OTLP_* family (headers, certificates, timeout,
// compression) themselves.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
)

// The OTLP protocols an exporter may speak; the OpenTelemetry default is http/protobuf.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// ChildEnv names the variables of the OTLP environment a worker hands its sdk children when
// it traces, so that the child runtime exports its own spans where the worker does (they
// join the worker's trace through the traceparent of `initialize`, docs/protocol.md).
// OTEL_EXPORTER_OTLP_HEADERS and the client key are not among them: they may carry
// credentials, which the children's allowlist keeps out (docs/sdk-children.md); an operator
// who needs them passes them with --child-env. OTEL_SERVICE_NAME is not either: a child
// names itself ServiceAgent.
var ChildEnv = []string{
	EnvEndpoint, EnvTracesEndpoint, EnvProtocol, EnvTracesProtocol,
	"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
	"OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	EnvSDKDisabled, EnvTracesExporter,
}

// Service names of subflow's programs (the resource's service.name unless OTEL_SERVICE_NAME
// says otherwise).
const (
	ServiceWorker  = "subflow-worker"
	ServiceStarter = "subflow-starter"
	ServiceAgent   = "subflow-agent"
)

// ShutdownTimeout bounds how long Shutdown waits for the last spans to be exported.
const ShutdownTimeout = 5 * time.Second

// Enabled reports whether the environment asks for spans to be exported over OTLP: an OTLP
// endpoint is set, and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
func Enabled() bool {
	if strings.EqualFold(os.Getenv(EnvSDKDisabled), "true") || os.Getenv(EnvTracesExporter) == "none" {
		return false
	}
	return os.Getenv(EnvEndpoint) != "" || os.Getenv(EnvTracesEndpoint) != ""
}

// Tracing is the tracer provider Setup installed.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil when tracing is off
}

// On reports whether spans are exported.
func (t *Tracing) On() bool { return t != nil && t.provider != nil }

// Shutdown exports the spans still buffered and stops the provider, waiting at most
// ShutdownTimeout; it does nothing when tracing is off. Programs call it before they exit.
func (t *Tracing) Shutdown() error {
	if !t.On() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: flush spans: %w", err)
	}
	return nil
}

// Setup installs the global tracer provider and the W3C trace-context propagator when
// Enabled, exporting in batches over OTLP with the protocol of
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL (grpc or http/protobuf,
// the default). service is the resource's service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES name one. When not Enabled it installs nothing and returns a
// Tracing that is off. An unknown protocol is an error naming the variable.
func Setup(ctx context.Context, service string) (*Tracing, error) {
	if !Enabled() {
		return &Tracing{}, nil
	}
	exp, err := newExporter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &Tracing{provider: tp}, nil
}

// newExporter is the OTLP exporter of the environment's protocol.
func newExporter(ctx context.Context) (*otlptrace.Exporter, error) {
	name, protocol := EnvTracesProtocol, os.Getenv(EnvTracesProtocol)
	if protocol == "" {
		name, protocol = EnvProtocol, os.Getenv(EnvProtocol)
	}
	var exp *otlptrace.Exporter
	var err error
	switch protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	case "", ProtocolHTTP:
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("telemetry: %s=%q: want %s or %s", name, protocol, ProtocolGRPC, ProtocolHTTP)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	return exp, nil
}

// TraceParent returns the W3C traceparent of the span in ctx, "" when ctx has none. It is how
// a trace crosses into a process that is not reached through Temporal (the sdk child,
// docs/protocol.md).
func TraceParent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// WithTraceParent returns ctx with the remote span named by a W3C traceparent as its
// parent; an empty or malformed traceparent leaves ctx as it is.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// tracer is the tracer of subflow's own spans, from the global provider (no-op unless Setup
// installed one).
func tracer() trace.Tracer { return otel.Tracer("github.com/subflow-dev/subflow") }
