// Package spans makes the proxy's OpenTelemetry spans: a call's server
// span, a client span per upstream attempt, a batch's span linked both
// ways to its callers', with the RPC semantic conventions a user chooses
// (Semconv) and the trace context read from and written to gRPC
// metadata. It sees the trace API only; package tracing owns the SDK.
//
// With proxy.WithTracing, every call gets a server span whose parent is
// the W3C context the client sent, every upstream attempt a client span
// under it (its reason: primary, fallback, hedge, retry, cascade), and the
// upstream receives a traceparent that names the attempt's span. A batch
// is one client span of its own, linked to the attempt span of each caller
// that rode in it, and each of those linked back to it: a trace shows
// which batch a call went in and what it waited for. Without WithTracing
// (the default) the call path only tests a nil pointer.
package spans

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/methods"
)

// Semconv says which OpenTelemetry RPC semantic conventions the spans
// follow.
type Semconv uint8

const (
	// SemconvOld: the conventions of semconv v1.26 that most gRPC
	// instrumentations emit today: rpc.system, rpc.service, rpc.method
	// (the bare method), rpc.grpc.status_code (an int).
	SemconvOld Semconv = iota
	// SemconvNew: the release candidate of semconv v1.40: rpc.system.name,
	// rpc.method ("package.Service/Method", or _OTHER with
	// rpc.method_original for a method the proxy does not know),
	// rpc.response.status_code (the code's name).
	SemconvNew
	// SemconvDup emits both; where a key is in both (rpc.method) the new
	// value is kept.
	SemconvDup
)

// SemconvFromEnv reads OTEL_SEMCONV_STABILITY_OPT_IN's value, as
// OpenTelemetry instrumentations do: "rpc" selects the new conventions,
// "rpc/dup" both; anything else the old ones.
func SemconvFromEnv(v string) Semconv {
	mode := SemconvOld
	for _, s := range strings.Split(v, ",") {
		switch strings.TrimSpace(s) {
		case "rpc":
			if mode != SemconvDup {
				mode = SemconvNew
			}
		case "rpc/dup":
			mode = SemconvDup
		}
	}
	return mode
}

// Span attributes of infergate's own (no convention covers them);
// AttrModel is the one the proxy adds to an attempt's span itself.
const (
	AttrModel      = attribute.Key("infergate.model")
	attrVersion    = attribute.Key("infergate.model_version")
	attrRoute      = attribute.Key("infergate.route")
	attrReason     = attribute.Key("infergate.route_reason")
	attrQueue      = attribute.Key("infergate.queue_seconds")
	attrAttempt    = attribute.Key("infergate.attempt")
	attrUpstream   = attribute.Key("infergate.upstream")
	attrBatchID    = attribute.Key("infergate.batch.id")
	attrBatchRows  = attribute.Key("infergate.batch.rows")
	attrBatchCalls = attribute.Key("infergate.batch.size")
	// What the call carried. OpenTelemetry has no attribute
	// for these: the RPC conventions size messages only as metrics
	// (rpc.server.request.size) and the GenAI ones count tokens, not
	// tensors.
	attrReqBytes    = attribute.Key("infergate.request.bytes")
	attrRespBytes   = attribute.Key("infergate.response.bytes")
	attrReqRows     = attribute.Key("infergate.request.rows")
	attrReqInputs   = attribute.Key("infergate.request.inputs")
	attrReqPartial  = attribute.Key("infergate.request.inputs_partial")
	attrServerAddr  = attribute.Key("server.address")
	attrRPCSystem   = attribute.Key("rpc.system")
	attrRPCService  = attribute.Key("rpc.service")
	attrRPCMethod   = attribute.Key("rpc.method")
	attrRPCGRPCCode = attribute.Key("rpc.grpc.status_code")
	attrRPCSysName  = attribute.Key("rpc.system.name")
	attrRPCOriginal = attribute.Key("rpc.method_original")
	attrRPCRespCode = attribute.Key("rpc.response.status_code")
)

// Tracer makes the proxy's spans.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	conv   Semconv
}

// New returns the Tracer making spans with tp's tracer (the proxy's
// instrumentation scope) that reads and writes the trace context with
// prop (nil: propagation.TraceContext{}, W3C traceparent) and follows
// conv.
func New(tp trace.TracerProvider, prop propagation.TextMapPropagator, conv Semconv) *Tracer {
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	return &Tracer{tracer: tp.Tracer("github.com/infergate/infergate/proxy"), prop: prop, conv: conv}
}

// Call is what a call's server span says of it at its end.
type Call struct {
	// Upstream is the name of the upstream that answered.
	Upstream       string
	Model, Version string
	// Route and Reason are the route that answered and why; "" none.
	Route, Reason string
	// Queue is the time waited in a batch queue.
	Queue             time.Duration
	BytesIn, BytesOut int64
	// Features is what the request carried.
	Features monitor.CallFeatures
}

// mdCarrier is gRPC metadata as a propagation.TextMapCarrier.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// incomingCarrier reads a call's incoming metadata for Extract without
// copying all of it (FromIncomingContext would, on every call).
type incomingCarrier struct{ ctx context.Context }

func (c incomingCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (incomingCarrier) Set(string, string) {} // read-only

func (c incomingCarrier) Keys() []string {
	md, _ := metadata.FromIncomingContext(c.ctx)
	return mdCarrier(md).Keys()
}

// spanName is the conventional span name of a full method
// ("/pkg.Service/Method"): "pkg.Service/Method".
func spanName(method string) string { return strings.TrimPrefix(method, "/") }

// rpcAttrs are the convention's attributes of method.
func (tr *Tracer) rpcAttrs(method string) []attribute.KeyValue {
	name := spanName(method)
	service, bare, _ := strings.Cut(name, "/")
	var kv []attribute.KeyValue
	if tr.conv != SemconvNew {
		kv = append(kv, attrRPCSystem.String("grpc"), attrRPCService.String(service), attrRPCMethod.String(bare))
	}
	if tr.conv != SemconvOld {
		kv = append(kv, attrRPCSysName.String("grpc"))
		if methods.Lookup(method).Known {
			kv = append(kv, attrRPCMethod.String(name))
		} else {
			// The convention's rule for a method the instrumentation does
			// not recognise: the proxy forwards any method, so a client's
			// made-up names must not become unbounded span attributes.
			kv = append(kv, attrRPCMethod.String("_OTHER"), attrRPCOriginal.String(name))
		}
	}
	return kv
}

// codeAttrs are the convention's attributes of a status code.
func (tr *Tracer) codeAttrs(code codes.Code) []attribute.KeyValue {
	switch tr.conv {
	case SemconvOld:
		return []attribute.KeyValue{attrRPCGRPCCode.Int(int(code))}
	case SemconvNew:
		return []attribute.KeyValue{attrRPCRespCode.String(codeName(code))}
	}
	return []attribute.KeyValue{attrRPCGRPCCode.Int(int(code)), attrRPCRespCode.String(codeName(code))}
}

// codeNames are the codes as the gRPC specification spells them, which
// rpc.response.status_code takes (CANCELLED, not Go's Canceled).
var codeNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// codeName is c as the specification spells it; its number when unknown.
func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return strconv.Itoa(int(c))
}

// serverError says whether a server span with code is an error: the RPC
// convention counts only the codes that say the server failed.
func serverError(c codes.Code) bool {
	switch c {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal,
		codes.Unavailable, codes.DataLoss:
		return true
	}
	return false
}

// StartServer starts a call's server span, a child of the trace context
// the client sent.
func (tr *Tracer) StartServer(ctx context.Context, method string) (context.Context, trace.Span) {
	ctx = tr.prop.Extract(ctx, incomingCarrier{ctx})
	return tr.tracer.Start(ctx, spanName(method), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tr.rpcAttrs(method)...))
}

// EndServer ends a call's server span with its code and what the proxy
// recorded of it.
func (tr *Tracer) EndServer(span trace.Span, code codes.Code, o Call) {
	kv := append(tr.codeAttrs(code), attrUpstream.String(o.Upstream))
	if o.Model != "" {
		kv = append(kv, AttrModel.String(o.Model), attrVersion.String(o.Version))
	}
	if o.Route != "" {
		kv = append(kv, attrRoute.String(o.Route))
	}
	if o.Reason != "" {
		kv = append(kv, attrReason.String(o.Reason))
	}
	if o.Queue > 0 {
		kv = append(kv, attrQueue.Float64(o.Queue.Seconds()))
	}
	kv = append(kv, attrReqBytes.Int64(o.BytesIn), attrRespBytes.Int64(o.BytesOut))
	kv = append(kv, featureAttrs(&o.Features)...)
	span.SetAttributes(kv...)
	if serverError(code) {
		span.SetStatus(otelcodes.Error, code.String())
	}
	span.End()
}

// StartClient starts the client span of one upstream attempt or stream to
// upstream at address and puts its trace context in the outgoing metadata
// (replacing the client's), so that the upstream's spans are its
// children.
func (tr *Tracer) StartClient(ctx context.Context, method, upstream, address, why string,
	extra ...attribute.KeyValue) (context.Context, trace.Span) {
	kv := append(tr.rpcAttrs(method), attrUpstream.String(upstream), attrServerAddr.String(address), attrAttempt.String(why))
	ctx, span := tr.tracer.Start(ctx, spanName(method), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(kv, extra...)...))
	return tr.inject(ctx), span
}

// inject writes ctx's span context into its outgoing metadata
// (FromOutgoingContext returns a copy, ours to edit).
func (tr *Tracer) inject(ctx context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	if md == nil {
		md = metadata.MD{}
	}
	tr.prop.Inject(ctx, mdCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}

// EndClient ends a client span with the attempt's code and, for a batched
// attempt, the link to its batch.
func (tr *Tracer) EndClient(span trace.Span, code codes.Code, queue time.Duration, b *batcher.Batch) {
	span.SetAttributes(tr.codeAttrs(code)...)
	if queue > 0 {
		span.SetAttributes(attrQueue.Float64(queue.Seconds()))
	}
	if b != nil {
		if sc, ok := b.Link.(trace.SpanContext); ok {
			span.AddLink(trace.Link{SpanContext: sc})
		}
		span.SetAttributes(attrBatchID.Int64(int64(b.ID)), attrBatchRows.Int(b.Rows), attrBatchCalls.Int(len(b.Calls)))
	}
	if code != codes.OK {
		span.SetStatus(otelcodes.Error, code.String())
	}
	span.End()
}

// StartBatch starts the span of a merged upstream call: a root of its own
// (it serves many traces), linked to the span of every caller in it,
// leaves its span context in b for the callers to link back to, and
// writes it into md, the batch call's own metadata.
func (tr *Tracer) StartBatch(ctx context.Context, method, upstream, address string, b *batcher.Batch,
	md metadata.MD) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, len(b.Calls))
	for _, c := range b.Calls {
		if sc := trace.SpanContextFromContext(c); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	kv := append(tr.rpcAttrs(method), attrUpstream.String(upstream), attrServerAddr.String(address),
		attrAttempt.String("batch"), attrBatchID.Int64(int64(b.ID)), attrBatchRows.Int(b.Rows),
		attrBatchCalls.Int(len(b.Calls)))
	ctx, span := tr.tracer.Start(ctx, spanName(method), trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(links...), trace.WithAttributes(kv...))
	b.Link = span.SpanContext()
	tr.prop.Inject(ctx, mdCarrier(md))
	return ctx, span
}

// featureAttrs are the span attributes of what an inference call's
// request carried: its rows, when its first input has a shape, and its
// inputs as "INPUT0:FP32[8,3,224,224]".
func featureAttrs(f *monitor.CallFeatures) []attribute.KeyValue {
	if f.NumInputs == 0 {
		return nil
	}
	var kv []attribute.KeyValue
	if f.Rows != 0 {
		kv = append(kv, attrReqRows.Int64(f.Rows))
	}
	if len(f.Inputs) > 0 {
		in := make([]string, len(f.Inputs))
		for i, s := range f.Inputs {
			in[i] = s.String()
		}
		kv = append(kv, attrReqInputs.StringSlice(in))
	}
	if f.Partial {
		kv = append(kv, attrReqPartial.Bool(true))
	}
	return kv
}
