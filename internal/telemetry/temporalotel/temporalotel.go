// Package temporalotel traces subflow's Temporal calls, workflows and activities with
// Temporal's OpenTelemetry interceptor (go.temporal.io/sdk/contrib/opentelemetry), made
// replay-safe for workflow spans (docs/tracing.md).
//
// The stock interceptor starts a workflow's RunWorkflow span, and an update's HandleUpdate
// span, every time the workflow code runs from its start: after a worker restart or a cache
// eviction the workflow replays and the span is emitted again, under a new id (and the
// evicted run's span is ended and emitted as well). Here those spans are deferred: their ids
// are a function of the workflow run (and update), so the spans started under them in any
// workflow task, on any worker, name the same parent; and the span itself is emitted once,
// when the workflow (or update handler) returns in a workflow task that is not a replay.
// The spans the interceptor starts from workflow code (StartActivity, StartChildWorkflow,
// signals) are only ever started outside replay already.
package temporalotel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/client"
	otelcontrib "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/subflow-dev/subflow/internal/telemetry"
)

// The interceptor's operation prefixes of the spans that are deferred, and the tags it sets
// on them (go.temporal.io/sdk/interceptor's workflowIDTagKey, runIDTagKey, updateIDTagKey).
const (
	opRunWorkflow  = "RunWorkflow:"
	opHandleUpdate = "HandleUpdate:"
	tagRunID       = "temporalRunID"
	tagUpdateID    = "temporalUpdateID"
)

// NewInterceptor returns the tracing interceptor for client.Options.Interceptors: clients
// dialed with it trace what they start, update and query, and workers built on such a client
// trace workflows and activities, joining the trace of whoever started the workflow. The
// spans go to the global tracer provider (telemetry.Setup), whose id generator the deferred
// workflow spans need.
func NewInterceptor() (interceptor.Interceptor, error) {
	tr := otel.Tracer("go.temporal.io/sdk")
	inner, err := otelcontrib.NewTracingInterceptor(otelcontrib.TracerOptions{
		Tracer:      tr,
		SpanStarter: startSpan,
		// Queries are polled (the status query every few hundred milliseconds by `starter
		// run --follow` and the batch progress bar): a span each would drown the trace.
		DisableQueryTracing: true,
	})
	if err != nil {
		return nil, err
	}
	return &tracing{Interceptor: inner}, nil
}

// tracing is the contrib interceptor with the closing marker inside its workflow
// interceptor.
type tracing struct {
	interceptor.Interceptor
}

func (t *tracing) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	m := &closeMarker{}
	m.Next = next
	return t.Interceptor.InterceptWorkflow(ctx, m)
}

// closeMarker sits just inside the tracing interceptor: when the workflow function or an
// update handler returns outside replay, it marks the deferred span the interceptor put in
// the context, which the interceptor ends right after.
type closeMarker struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (m *closeMarker) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	ret, err := m.Next.ExecuteWorkflow(ctx, in)
	markLive(ctx)
	return ret, err
}

func (m *closeMarker) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	ret, err := m.Next.ExecuteUpdate(ctx, in)
	markLive(ctx)
	return ret, err
}

func markLive(ctx workflow.Context) {
	if workflow.IsReplaying(ctx) {
		return
	}
	if span, ok := otelcontrib.SpanFromWorkflowContext(ctx); ok {
		if d, ok := span.(*deferredSpan); ok {
			d.markLive()
		}
	}
}

// startSpan is the interceptor's SpanStarter: deferred spans for RunWorkflow and
// HandleUpdate, ordinary ones otherwise.
func startSpan(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) trace.Span {
	if strings.HasPrefix(name, opRunWorkflow) || strings.HasPrefix(name, opHandleUpdate) {
		return &deferredSpan{tracer: t, name: name, parent: trace.SpanContextFromContext(ctx), opts: opts}
	}
	_, span := t.Start(ctx, name, opts...)
	return span
}

// deferredSpan is a RunWorkflow or HandleUpdate span: its span context is known from the
// start (a function of the run and update ids, which the interceptor sets as attributes
// right after starting it), and it records a real span only when ended after markLive.
// Workflow code runs one coroutine at a time; the mutex only guards against that changing.
type deferredSpan struct {
	noop.Span
	tracer trace.Tracer
	name   string
	parent trace.SpanContext
	opts   []trace.SpanStartOption

	mu     sync.Mutex
	attrs  []attribute.KeyValue
	sc     trace.SpanContext
	live   bool
	errs   []error
	status codes.Code
	desc   string
	ended  bool
}

func (d *deferredSpan) markLive() {
	d.mu.Lock()
	d.live = true
	d.mu.Unlock()
}

// SpanContext is the span's deterministic context: the parent's trace (or one derived from
// the run when there is no parent) and a span id derived from the run, the span's name and
// the update id.
func (d *deferredSpan) SpanContext() trace.SpanContext {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.spanContextLocked()
}

func (d *deferredSpan) spanContextLocked() trace.SpanContext {
	if d.sc.IsValid() {
		return d.sc
	}
	var runID, updateID string
	for _, kv := range d.attrs {
		switch kv.Key {
		case tagRunID:
			runID = kv.Value.AsString()
		case tagUpdateID:
			updateID = kv.Value.AsString()
		}
	}
	if runID == "" {
		// Not yet known: no child can have been started under the span yet.
		return trace.SpanContext{}
	}
	traceID, spanID := telemetry.DeterministicIDs(runID, d.name, updateID)
	flags := trace.FlagsSampled
	if d.parent.IsValid() {
		traceID, flags = d.parent.TraceID(), d.parent.TraceFlags()
	}
	d.sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: flags})
	return d.sc
}

func (d *deferredSpan) IsRecording() bool { return true }

func (d *deferredSpan) SetAttributes(kv ...attribute.KeyValue) {
	d.mu.Lock()
	d.attrs = append(d.attrs, kv...)
	d.mu.Unlock()
}

func (d *deferredSpan) RecordError(err error, _ ...trace.EventOption) {
	if err == nil {
		return
	}
	d.mu.Lock()
	d.errs = append(d.errs, err)
	d.mu.Unlock()
}

func (d *deferredSpan) SetStatus(code codes.Code, desc string) {
	d.mu.Lock()
	d.status, d.desc = code, desc
	d.mu.Unlock()
}

// End records the span, from its start time to now, when it was marked live; else (a replay,
// or a workflow evicted from the cache mid-run) it records nothing.
func (d *deferredSpan) End(...trace.SpanEndOption) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ended || !d.live {
		return
	}
	d.ended = true
	sc := d.spanContextLocked()
	if !sc.IsValid() || !sc.IsSampled() {
		return
	}
	ctx := context.Background()
	if d.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, d.parent)
	}
	ctx = telemetry.WithFixedIDs(ctx, sc.TraceID(), sc.SpanID())
	_, span := d.tracer.Start(ctx, d.name, append(d.opts, trace.WithAttributes(d.attrs...))...)
	for _, err := range d.errs {
		span.RecordError(err)
	}
	if d.status != codes.Unset {
		span.SetStatus(d.status, d.desc)
	}
	span.End(trace.WithTimestamp(time.Now()))
}

// Setup is telemetry.Setup for a program that dials Temporal with copts: when the
// environment asks for tracing it also adds the tracing interceptor to copts, so the client
// and the workers built on it trace. The caller shuts the returned Tracing down before it
// exits.
func Setup(ctx context.Context, service string, copts *client.Options) (*telemetry.Tracing, error) {
	tracing, err := telemetry.Setup(ctx, service)
	if err != nil || !tracing.On() {
		return tracing, err
	}
	ic, err := NewInterceptor()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("temporalotel: %w", err), tracing.Shutdown())
	}
	copts.Interceptors = append(copts.Interceptors, ic)
	return tracing, nil
}
