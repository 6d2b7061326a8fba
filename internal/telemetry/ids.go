package telemetry

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// fixedIDsKey carries the ids a span started with WithFixedIDs must get.
type fixedIDsKey struct{}

type fixedIDs struct {
	traceID trace.TraceID
	spanID  trace.SpanID
}

// WithFixedIDs returns ctx such that the next span started from it by Setup's provider gets
// spanID, and traceID when it has no parent. Workflow code emits a span only once, at its
// end, but its children were started (in earlier workflow tasks, maybe on other workers)
// under the span's id: that id has to be a function of the workflow run (DeterministicIDs).
func WithFixedIDs(ctx context.Context, traceID trace.TraceID, spanID trace.SpanID) context.Context {
	return context.WithValue(ctx, fixedIDsKey{}, fixedIDs{traceID: traceID, spanID: spanID})
}

// DeterministicIDs derives a trace id and a span id from parts (say a workflow run id and a
// span name): the same parts give the same ids in every process.
func DeterministicIDs(parts ...string) (trace.TraceID, trace.SpanID) {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	return tid, sid
}

// idGenerator is the provider's id generator: random ids, except for spans started from a
// context of WithFixedIDs.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(fixedIDsKey{}).(fixedIDs); ok {
		return f.traceID, f.spanID
	}
	var tid trace.TraceID
	_, _ = crand.Read(tid[:])
	return tid, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(fixedIDsKey{}).(fixedIDs); ok {
		return f.spanID
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
