package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Model request and tool call spans, after the OpenTelemetry GenAI semantic conventions
// (docs/tracing.md lists what each carries).

// genAISystemKey is gen_ai.system, the older name of gen_ai.provider.name that many GenAI
// observability backends still read; both are set.
const genAISystemKey = attribute.Key("gen_ai.system")

// ModelRequest describes one model request for StartModelRequest.
type ModelRequest struct {
	// Provider is subflow's model provider name (a route's provider).
	Provider string
	// Model is the requested model.
	Model string
	// MaxTokens is the output cap, 0 when none.
	MaxTokens int64
	// SessionID is the asking session, recorded as gen_ai.conversation.id.
	SessionID string
}

// ModelResponse is what EndModelRequest records of the answer.
type ModelResponse struct {
	InputTokens, OutputTokens int64
	// Finish is the finish reason ("stop", "length", "tool-calls"; "" when the request failed).
	Finish string
}

// StartModelRequest starts the span of a model request ("chat MODEL", kind client) under the
// span of ctx.
func StartModelRequest(ctx context.Context, r ModelRequest) (context.Context, trace.Span) {
	provider := genAIProvider(r.Provider)
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(provider),
		genAISystemKey.String(provider),
		semconv.GenAIRequestModel(r.Model),
	}
	if r.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(r.MaxTokens)))
	}
	if r.SessionID != "" {
		attrs = append(attrs, semconv.GenAIConversationID(r.SessionID))
	}
	return tracer().Start(ctx, "chat "+r.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// EndModelRequest records the response (or err) on a span of StartModelRequest and ends it.
func EndModelRequest(span trace.Span, resp ModelResponse, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(
			semconv.GenAIUsageInputTokens(int(resp.InputTokens)),
			semconv.GenAIUsageOutputTokens(int(resp.OutputTokens)),
		)
		if resp.Finish != "" {
			span.SetAttributes(semconv.GenAIResponseFinishReasons(resp.Finish))
		}
	}
	span.End()
}

// StartToolCall starts the span of one tool call ("execute_tool NAME", kind internal).
func StartToolCall(ctx context.Context, name, callID string) (context.Context, trace.Span) {
	return tracer().Start(ctx, "execute_tool "+name, trace.WithAttributes(
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(name),
		semconv.GenAIToolCallID(callID),
		semconv.GenAIToolType("function"),
	))
}

// EndToolCall ends a span of StartToolCall, marking a call whose result is an error.
func EndToolCall(span trace.Span, isError bool, deferred bool) {
	if isError {
		span.SetStatus(codes.Error, "the tool returned an error result")
	}
	if deferred {
		span.SetAttributes(attribute.Bool("subflow.tool.deferred", true))
	}
	span.End()
}

// genAIProvider maps subflow's model provider names to gen_ai.provider.name's well-known
// values; others are used as they are.
func genAIProvider(provider string) string {
	switch provider {
	case "deepseek-official":
		return semconv.GenAIProviderNameDeepseek.Value.AsString()
	default:
		return provider
	}
}
