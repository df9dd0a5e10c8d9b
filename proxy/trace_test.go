package proxy

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
)

// spanAttr returns a span attribute's value as text.
func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// A routed call's spans: the server span is the child of the client's
// trace context, each attempt a client span under it that names its
// reason and target, and the upstream gets a traceparent naming the
// attempt's span, not the client's.
func TestTracingRoutedCall(t *testing.T) {
	for _, conv := range []Semconv{SemconvOld, SemconvNew, SemconvDup} {
		t.Run(fmt.Sprint("semconv=", conv), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				e := newRouteEnvWith(t, nil, WithTracing(tp, propagation.TraceContext{}, conv))
				e.pri.set(behaveError) // UNAVAILABLE: retried on the fallback
				parent := trace.NewSpanContext(trace.SpanContextConfig{
					TraceID: trace.TraceID{0xa1}, SpanID: trace.SpanID{0xb2}, TraceFlags: trace.FlagsSampled, Remote: true})
				ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent",
					fmt.Sprintf("00-%s-%s-01", parent.TraceID(), parent.SpanID()))
				ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if _, err := e.client.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "big"}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				spans := rec.Ended()
				var server sdktrace.ReadOnlySpan
				var attempts []sdktrace.ReadOnlySpan
				for _, s := range spans {
					switch s.SpanKind() {
					case trace.SpanKindServer:
						server = s
					case trace.SpanKindClient:
						attempts = append(attempts, s)
					}
				}
				if server == nil || server.Parent().SpanID() != parent.SpanID() || server.SpanContext().TraceID() != parent.TraceID() {
					t.Fatalf("server span %v, want the child of the client's span", server)
				}
				if spanAttr(server, "infergate.route") != "fallback" || spanAttr(server, "infergate.route_reason") != "retry" ||
					spanAttr(server, "infergate.model") != "big" {
					t.Errorf("server span attributes %v", server.Attributes())
				}
				if len(attempts) != 2 {
					t.Fatalf("%d attempt spans, want the primary's and the retry's", len(attempts))
				}
				pri, retry := attempts[0], attempts[1]
				if spanAttr(pri, "infergate.attempt") != "primary" || spanAttr(retry, "infergate.attempt") != "retry" ||
					spanAttr(retry, "infergate.model") != "small" || pri.Status().Code.String() != "Error" {
					t.Errorf("attempts: %v / %v, status %v", pri.Attributes(), retry.Attributes(), pri.Status())
				}
				for _, a := range attempts {
					if a.Parent().SpanID() != server.SpanContext().SpanID() {
						t.Errorf("attempt %v's parent is not the server span", a.Attributes())
					}
				}
				// Each server got the traceparent of the attempt sent to it.
				for _, c := range []struct {
					m    *modelServer
					span sdktrace.ReadOnlySpan
				}{{e.pri, pri}, {e.edge, retry}} {
					want := fmt.Sprintf("00-%s-%s-01", c.span.SpanContext().TraceID(), c.span.SpanContext().SpanID())
					c.m.mu.Lock()
					got := c.m.traceparents
					c.m.mu.Unlock()
					if len(got) != 1 || got[0] != want {
						t.Errorf("%s got traceparent %q, want %q", c.m.name, got, want)
					}
				}
				// The conventions asked for.
				method, code := spanAttr(server, "rpc.method"), spanAttr(server, "rpc.grpc.status_code")
				newCode := spanAttr(server, "rpc.response.status_code")
				switch conv {
				case SemconvOld:
					if method != "ModelInfer" || code != "0" || newCode != "" || spanAttr(server, "rpc.system") != "grpc" {
						t.Errorf("old conventions: %v", server.Attributes())
					}
				case SemconvNew:
					if method != "inference.GRPCInferenceService/ModelInfer" || code != "" || newCode != "OK" ||
						spanAttr(server, "rpc.system.name") != "grpc" {
						t.Errorf("new conventions: %v", server.Attributes())
					}
				case SemconvDup:
					if method != "inference.GRPCInferenceService/ModelInfer" || code != "0" || newCode != "OK" {
						t.Errorf("both conventions: %v", server.Attributes())
					}
				}
			})
		})
	}
}

// A sampled call's trace id reaches the recorder (it becomes the exemplar
// of its latency bucket) on both paths; a call whose client did not
// sample its trace passes none, as does every call without tracing.
func TestTracedCallRecordsItsTraceID(t *testing.T) {
	for _, relay := range []bool{true, false} {
		t.Run(fmt.Sprint("relay=", relay), func(t *testing.T) {
			defer func(v bool) { grpcPathOnly = v }(grpcPathOnly)
			grpcPathOnly = !relay
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			e := newEnv(t, WithTracing(tp, propagation.TraceContext{}, SemconvOld))
			client := kservepb.NewGRPCInferenceServiceClient(e.viaPxy)
			call := func(flags string) monitor.Sample {
				t.Helper()
				ctx := ctxT(t)
				if flags != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "traceparent",
						"00-a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1-b2b2b2b2b2b2b2b2-"+flags)
				}
				if _, err := client.ModelInfer(ctx, simpleRequest("m", 64)); err != nil {
					t.Fatal(err)
				}
				return e.rec.next(t).sm
			}

			root := call("")
			var server sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindServer {
					server = s
				}
			}
			if server == nil {
				t.Fatal("no server span")
			}
			if want := server.SpanContext().TraceID(); root.TraceID != want || root.TraceID == ([16]byte{}) {
				t.Errorf("new trace: recorded trace id %x, want the server span's %x", root.TraceID, want)
			}
			if got := call("01").TraceID; fmt.Sprintf("%x", got) != "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1" {
				t.Errorf("sampled parent: recorded trace id %x, want the client's", got)
			}
			if got := call("00").TraceID; got != ([16]byte{}) {
				t.Errorf("unsampled parent: recorded trace id %x, want none", got)
			}
		})
	}
}

// keptProvider is a provider that decides at a call's end which traces it
// exports, as package tracing's does with tail sampling: it keeps none.
type keptProvider struct{ *sdktrace.TracerProvider }

func (keptProvider) Kept(trace.SpanContext) bool { return false }

// Under tail sampling, a sampled call whose trace was then dropped leaves
// no exemplar: it would point at a trace nobody kept.
func TestDroppedTraceLeavesNoExemplar(t *testing.T) {
	tp := keptProvider{sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))}
	e := newEnv(t, WithTracing(tp, propagation.TraceContext{}, SemconvOld))
	client := kservepb.NewGRPCInferenceServiceClient(e.viaPxy)
	if _, err := client.ModelInfer(ctxT(t), simpleRequest("m", 64)); err != nil {
		t.Fatal(err)
	}
	if got := e.rec.next(t).sm.TraceID; got != ([16]byte{}) {
		t.Errorf("dropped trace: recorded trace id %x, want none", got)
	}
}
