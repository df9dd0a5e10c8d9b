package proxy

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/proxy/spans"
)

// Tracing (package spans makes the spans). Without WithTracing (the
// default) the call path only tests a nil pointer.

// Semconv says which OpenTelemetry RPC semantic conventions the spans
// follow (spans.Semconv).
type Semconv = spans.Semconv

// The conventions: semconv v1.26's, v1.40's, or both (spans.SemconvOld,
// spans.SemconvNew, spans.SemconvDup).
const (
	SemconvOld = spans.SemconvOld
	SemconvNew = spans.SemconvNew
	SemconvDup = spans.SemconvDup
)

// SemconvFromEnv reads OTEL_SEMCONV_STABILITY_OPT_IN's value
// (spans.SemconvFromEnv).
func SemconvFromEnv(v string) Semconv { return spans.SemconvFromEnv(v) }

// attrModel is the span attribute of a call's model.
const attrModel = spans.AttrModel

// tracing is the proxy's instrumentation; nil when off.
type tracing struct {
	t *spans.Tracer
	// kept says whether a sampled trace was exported, for a provider that
	// decides at the call's end (tail sampling); nil: every sampled trace
	// is.
	kept func(trace.SpanContext) bool
}

// keptSayer is a provider that decides which traces it exports when their
// calls end (package tracing's, with tail sampling) and says which.
type keptSayer interface {
	Kept(trace.SpanContext) bool
}

// WithTracing makes spans with tp's tracer and reads and writes the trace
// context with prop (propagation.TraceContext{} for W3C traceparent). A
// nil tp, the default, makes none and costs nothing.
func WithTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator, conv Semconv) Option {
	return optionFunc(func(o *options) {
		if tp == nil {
			o.tracing = nil
			return
		}
		o.tracing = &tracing{t: spans.New(tp, prop, conv)}
		if k, ok := tp.(keptSayer); ok {
			o.tracing.kept = k.Kept
		}
	})
}

// address is up's target, for the server.address attribute.
func (u *Upstream) address() string {
	if a := u.Address(); a != "" {
		return a
	}
	return u.Endpoints()[0].Conns()[0].Target()
}

// startServer starts a call's server span, a child of the trace context
// the client sent.
func (tr *tracing) startServer(ctx context.Context, method string) (context.Context, trace.Span) {
	return tr.t.StartServer(ctx, method)
}

// endServer ends a call's server span with what recordCall recorded.
func (tr *tracing) endServer(span trace.Span, code codes.Code, o outcome) {
	tr.t.EndServer(span, code, spans.Call{Upstream: o.upName, Model: o.model, Version: o.version, Route: o.route,
		Reason: o.reason, Queue: o.queue, BytesIn: o.bytesIn, BytesOut: o.bytesOut, Features: o.feat})
}

// exemplar is the trace id a call's latency sample carries, read after
// its server span ended: a sampled call's, and under tail sampling only
// one that was kept; an exemplar must not point at a trace nobody kept.
func (tr *tracing) exemplar(span trace.Span) (trace.TraceID, bool) {
	sc := span.SpanContext()
	if !sc.IsSampled() || (tr.kept != nil && !tr.kept(sc)) {
		return trace.TraceID{}, false
	}
	return sc.TraceID(), true
}

// startClient starts the client span of one upstream attempt or stream to
// up and puts its trace context in the outgoing metadata.
func (tr *tracing) startClient(ctx context.Context, method string, up *Upstream, why string,
	extra ...attribute.KeyValue) (context.Context, trace.Span) {
	return tr.t.StartClient(ctx, method, up.Name(), up.address(), why, extra...)
}

// endClient ends a client span with the attempt's code and, for a batched
// attempt, the link to its batch.
func (tr *tracing) endClient(span trace.Span, err error, queue time.Duration, b *batcher.Batch) {
	tr.t.EndClient(span, codeOf(err), queue, b)
}

// startBatch starts the span of a merged upstream call, linked to its
// callers' spans, and writes its trace context into md.
func (tr *tracing) startBatch(ctx context.Context, method string, up *Upstream, b *batcher.Batch,
	md metadata.MD) (context.Context, trace.Span) {
	return tr.t.StartBatch(ctx, method, up.Name(), up.address(), b, md)
}
