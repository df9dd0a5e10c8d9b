package sim

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// harness is a Server on a real gRPC listener (127.0.0.1:0) with clients.
type harness struct {
	srv   *Server
	conn  *grpc.ClientConn
	ks    kservepb.GRPCInferenceServiceClient
	tf    tfservingpb.PredictionServiceClient
	admin string
	// handled receives once per finished unary or stream handler, so
	// tests can wait for the server side to finish without polling.
	handled chan string
}

// instantSleep is the default sleeper in tests: simulated time passes at
// once, so no test waits on the wall clock.
func instantSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func start(t testing.TB, cfg Config) *harness {
	t.Helper()
	if cfg.Sleep == nil {
		cfg.Sleep = instantSleep
	}
	if cfg.SampleInterval == 0 {
		cfg.SampleInterval = -1
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := &harness{srv: srv, handled: make(chan string, 1024)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(ServerOptions(),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			defer h.markHandled(info.FullMethod)
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			defer h.markHandled(info.FullMethod)
			return handler(srv, ss)
		}))
	gs := grpc.NewServer(opts...)
	srv.RegisterGRPC(gs)
	go gs.Serve(srv.WrapListener(lis))
	hs := httptest.NewServer(srv.AdminHandler())
	h.admin = hs.URL
	h.conn, err = grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)))
	if err != nil {
		t.Fatal(err)
	}
	h.ks = kservepb.NewGRPCInferenceServiceClient(h.conn)
	h.tf = tfservingpb.NewPredictionServiceClient(h.conn)
	t.Cleanup(func() {
		h.conn.Close()
		srv.Close()
		gs.Stop()
		hs.Close()
	})
	return h
}

// markHandled reports a finished handler; when nobody reads (benchmarks)
// the events are dropped rather than blocking the server.
func (h *harness) markHandled(method string) {
	select {
	case h.handled <- method:
	default:
	}
}

// wantCode fails unless err is a gRPC status with code and a message
// containing substr.
func wantCode(t *testing.T, err error, code codes.Code, substr string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
	if !strings.Contains(st.Message(), substr) {
		t.Fatalf("message %q does not contain %q", st.Message(), substr)
	}
}

func rawInt32s(v []int32) []byte { return int32sToRaw(v) }

func rawFloats(v []float32) []byte { return float32sToRaw(v) }

func decodeInt32s(raw []byte) []int32 { return rawToInt32s(raw) }

func decodeFloats(raw []byte) []float32 {
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

// seq returns n values start, start+step, ...
func seq(n int, start, step float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = start + float32(i)*step
	}
	return v
}
