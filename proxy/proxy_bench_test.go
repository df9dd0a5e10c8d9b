package proxy

import (
	"context"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proxy/route"
	tracingsdk "github.com/infergate/infergate/tracing"
)

// discardRecorder keeps nothing, so the benchmark measures the proxy and
// not a test double.
type discardRecorder struct{ g monitor.Gauge }

func (*discardRecorder) Record(monitor.SeriesKey, monitor.Sample) {}

func (r *discardRecorder) InFlight(string) *monitor.Gauge { return &r.g }

// benchEnv starts a raw echo backend, which costs next to nothing, and a
// proxy in front of it, over real loopback TCP.
func benchEnv(b *testing.B) (direct, viaProxy *grpc.ClientConn) {
	b.Helper()
	// cmd/infergate always hands the proxy a router, an empty one while
	// nothing is routed (so that a reload can add routes): the calls
	// measured here pay for asking it, as a deployed proxy's do.
	return benchEnvRouted(b, func(*Upstream) *route.Router {
		r, err := route.NewRouter(route.RouterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return r
	})
}

// benchEnvRouted is benchEnv with a router built by route (nil: none).
// benchEndpoints is the endpoints of benchEnv's upstream (the same echo
// server each time): over 1, the calls go through a pool's pick.
var benchEndpoints = 1

func benchEnvRouted(b *testing.B, route func(up *Upstream) *route.Router, extra ...Option) (direct, viaProxy *grpc.ClientConn) {
	b.Helper()
	echo := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(DefaultMaxMsgSize), grpc.MaxSendMsgSize(DefaultMaxMsgSize),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			f := new(Frame)
			if err := ss.RecvMsg(f); err != nil {
				return err
			}
			defer f.Free()
			return ss.SendMsg(f)
		}))
	addr := serveB(b, echo)
	target := addr
	for range benchEndpoints - 1 {
		target += "," + addr
	}
	up, err := DialUpstream(target, UpstreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// cmd/infergate always hands the proxy a batcher, one that batches
	// nothing while batching is off (so that a reload can turn it on):
	// the calls measured here pay for asking it, as a deployed proxy's do.
	bat, err := batcher.New(batcher.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bat.Close() })
	opts := append([]Option{WithRecorder(&discardRecorder{}), WithBatcher(bat)}, extra...)
	if route != nil {
		r := route(up)
		b.Cleanup(func() { r.Close() })
		opts = append(opts, WithRouter(r))
	}
	p, err := New(StaticDirector(up), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return dial(b, addr), dial(b, serveFront(b, p, p.NewServer()))
}

func serveB(b *testing.B, srv *grpc.Server) string {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
	return lis.Addr().String()
}

var benchSizes = []struct {
	name string
	raw  int // bytes per input; the request carries two inputs
}{{"128B", 32}, {"1MiB", 512 << 10}}

func benchUnary(b *testing.B, cc *grpc.ClientConn, raw int) {
	in, err := proto.Marshal(simpleRequest("simple", raw))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		resp := new(Frame)
		if err := cc.Invoke(ctx, "/inference.GRPCInferenceService/ModelInfer", NewFrame(in), resp, grpc.ForceCodecV2(rawCodec{})); err != nil {
			b.Fatal(err)
		}
		resp.Free()
	}
}

// BenchmarkProxyUnary measures one ModelInfer call through the proxy to an
// echo backend; BenchmarkDirectUnary, its peer, the same call without the
// proxy. The proxy's cost is the difference.
func BenchmarkProxyUnary(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			_, via := benchEnv(b)
			benchUnary(b, via, size.raw)
		})
	}
}

func BenchmarkDirectUnary(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			direct, _ := benchEnv(b)
			benchUnary(b, direct, size.raw)
		})
	}
}

// BenchmarkProxyUnaryParallel runs small calls from many goroutines, as a
// loaded proxy sees them.
func BenchmarkProxyUnaryParallel(b *testing.B) {
	_, via := benchEnv(b)
	benchParallel(b, via)
}

// BenchmarkProxyUnaryParallelTraced is BenchmarkProxyUnaryParallel with
// every call traced (sampled, the spans made and ended, not exported):
// the cost of tracing on the call path is the difference.
func BenchmarkProxyUnaryParallelTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, via := benchEnvRouted(b, nil, WithTracing(tp, propagation.TraceContext{}, SemconvOld))
	benchParallel(b, via)
}

// BenchmarkProxyUnaryParallelTailSampled is BenchmarkProxyUnaryParallelTraced
// with tail-based sampling deciding at each call's end, at a budget far
// under the load (most calls dropped, none exported): its cost is the
// difference with BenchmarkProxyUnaryParallelTraced.
func BenchmarkProxyUnaryParallelTailSampled(b *testing.B) {
	tail := tracingsdk.NewTailSampler(sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter()),
		tracingsdk.TailOptions{MaxSpansPerSecond: 100})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(tail))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, via := benchEnvRouted(b, nil, WithTracing(tp, propagation.TraceContext{}, SemconvOld))
	benchParallel(b, via)
}

// BenchmarkProxyUnaryParallelRouted is BenchmarkProxyUnaryParallel with
// the model routed (a fallback, its breaker closed): "breaker" without
// hedging, "hedged" with a hedge timer armed per call. The cost of the
// route step is the difference with BenchmarkProxyUnaryParallel.
func BenchmarkProxyUnaryParallelRouted(b *testing.B) {
	for _, tc := range []struct {
		name  string
		hedge time.Duration
	}{{"breaker", -1}, {"hedged", time.Second}} {
		b.Run(tc.name, func(b *testing.B) {
			_, via := benchEnvRouted(b, func(up *Upstream) *route.Router {
				r, err := route.NewRouter(route.RouterOptions{Routes: []route.RouteConfig{{
					Model: "simple", Upstream: up, Fallback: &route.FallbackTarget{Model: "simple_small"}, HedgeAfter: tc.hedge,
				}}})
				if err != nil {
					b.Fatal(err)
				}
				return r
			})
			benchParallel(b, via)
		})
	}
}

func benchParallel(b *testing.B, via *grpc.ClientConn) {
	in, err := proto.Marshal(simpleRequest("simple", 32))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp := new(Frame)
			if err := via.Invoke(context.Background(), "/inference.GRPCInferenceService/ModelInfer", NewFrame(in), resp, grpc.ForceCodecV2(rawCodec{})); err != nil {
				b.Error(err)
				return
			}
			resp.Free()
		}
	})
}
