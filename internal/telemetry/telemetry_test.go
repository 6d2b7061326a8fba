package telemetry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// TestSetupOffWithoutEndpoint: without an OTLP endpoint nothing is installed.
func TestSetupOffWithoutEndpoint(t *testing.T) {
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvTracesEndpoint, "")
	tr, err := Setup(context.Background(), ServiceWorker)
	require.NoError(t, err)
	assert.False(t, tr.On())
	assert.NoError(t, tr.Shutdown())

	t.Setenv(EnvEndpoint, "http://127.0.0.1:1")
	t.Setenv(EnvSDKDisabled, "true")
	assert.False(t, Enabled(), "OTEL_SDK_DISABLED wins")
}

// TestSetupRejectsUnknownProtocol names the variable and the protocols it takes.
func TestSetupRejectsUnknownProtocol(t *testing.T) {
	t.Setenv(EnvEndpoint, "http://127.0.0.1:1")
	t.Setenv(EnvProtocol, "http/json")
	_, err := Setup(context.Background(), ServiceWorker)
	require.EqualError(t, err, `telemetry: OTEL_EXPORTER_OTLP_PROTOCOL="http/json": want grpc or http/protobuf`)
}

// TestTraceParentRoundTrip: the traceparent handed to an sdk child names the parent's span.
func TestTraceParentRoundTrip(t *testing.T) {
	tid, sid := DeterministicIDs("run", "span")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	tp := TraceParent(trace.ContextWithSpanContext(context.Background(), sc))
	assert.Equal(t, "00-"+tid.String()+"-"+sid.String()+"-01", tp)
	got := trace.SpanContextFromContext(WithTraceParent(context.Background(), tp))
	assert.Equal(t, tid, got.TraceID())
	assert.Equal(t, sid, got.SpanID())
	assert.True(t, got.IsRemote())
	assert.Empty(t, TraceParent(context.Background()))
	assert.False(t, trace.SpanContextFromContext(WithTraceParent(context.Background(), "garbage")).IsValid())
}
