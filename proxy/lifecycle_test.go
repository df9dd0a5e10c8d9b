package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

func TestGracefulStopLetsCallsFinish(t *testing.T) {
	b := startBackend(t)
	up, err := DialUpstream(b.addr, UpstreamOptions{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(StaticDirector(up))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := p.NewServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := &signalListener{Listener: lis, closed: make(chan struct{})}
	go func() { _ = srv.Serve(sl) }()
	defer srv.Stop()
	cc := dial(t, lis.Addr().String())

	errc := make(chan error, 1)
	go func() {
		_, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctxT(t), simpleRequest(modelSlow, 16))
		errc <- err
	}()
	<-b.entered
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	<-sl.closed
	close(b.release)
	if err := <-errc; err != nil {
		t.Errorf("call in flight during GracefulStop: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(testTimeout):
		t.Error("GracefulStop did not return")
	}
}

func TestNewChecksOptions(t *testing.T) {
	d := DirectorFunc(func(context.Context, string) (*Upstream, error) { return nil, errors.New("x") })
	if _, err := New(nil); err == nil {
		t.Error("nil director accepted")
	}
	if _, err := New(d, WithLogRequests(true)); err == nil || err.Error() != "proxy: WithLogRequests needs WithLogger" {
		t.Errorf("WithLogRequests without a logger: %v", err)
	}
}

func TestDirectorErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"status passes", status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied, "no"},
		{"plain error", errors.New("no upstream for model"), codes.Unavailable,
			"infergate: no route for /inference.GRPCInferenceService/ModelInfer: no upstream for model"},
		{"nil upstream", nil, codes.Internal, "infergate: director returned no upstream for /inference.GRPCInferenceService/ModelInfer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(DirectorFunc(func(context.Context, string) (*Upstream, error) { return nil, tc.err }))
			if err != nil {
				t.Fatal(err)
			}
			cc := dial(t, serve(t, p.NewServer()))
			_, err = kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctxT(t), simpleRequest("simple", 16))
			if s := status.Convert(err); s.Code() != tc.code || s.Message() != tc.msg {
				t.Errorf("got %v, want %v %q", err, tc.code, tc.msg)
			}
		})
	}
}

func TestUpstreamRoundRobin(t *testing.T) {
	b := startBackend(t)
	up, err := DialUpstream(b.addr, UpstreamOptions{Conns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	seen := map[*grpc.ClientConn]int{}
	for range 6 {
		seen[up.Conn()]++
	}
	if len(seen) != 3 {
		t.Errorf("%d distinct connections in 6 picks, want 3", len(seen))
	}
	for _, n := range seen {
		if n != 2 {
			t.Errorf("uneven picks %v", seen)
		}
	}
}

func TestCodeClass(t *testing.T) {
	cases := []struct {
		code codes.Code
		want string
	}{
		{codes.OK, "ok"},
		{codes.Canceled, "client_error"},
		{codes.InvalidArgument, "client_error"},
		{codes.NotFound, "client_error"},
		{codes.Unauthenticated, "client_error"},
		{codes.FailedPrecondition, "client_error"},
		{codes.ResourceExhausted, "server_error"},
		{codes.DeadlineExceeded, "server_error"},
		{codes.Unavailable, "server_error"},
		{codes.Internal, "server_error"},
		{codes.Unimplemented, "server_error"},
	}
	for _, tc := range cases {
		if got := codeClass(tc.code); got != tc.want {
			t.Errorf("codeClass(%v) = %q, want %q", tc.code, got, tc.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the proxy's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogging(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	t.Run("quiet by default", func(t *testing.T) {
		e := newEnv(t, WithLogger(logger))
		if _, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), simpleRequest("simple", 16)); err != nil {
			t.Fatal(err)
		}
		e.rec.next(t)
		if buf.String() != "" {
			t.Errorf("logged %q for a successful call", buf.String())
		}
	})
	t.Run("one line per call", func(t *testing.T) {
		e := newEnv(t, WithLogger(logger), WithLogRequests(true))
		if _, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), simpleRequest("simple", 16)); err != nil {
			t.Fatal(err)
		}
		e.rec.next(t)
		if out := buf.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "model=simple") || !strings.Contains(out, "code=OK") {
			t.Errorf("log %q", out)
		}
	})
}

func TestServiceRegisteredOnTheProxyServer(t *testing.T) {
	// The raw codec falls back to protobuf, so a service registered on the
	// proxy's own server is served there; other calls still pass through.
	e := newEnvWith(t, func(srv *grpc.Server) {
		hs := health.NewServer()
		hs.SetServingStatus("infergate", healthpb.HealthCheckResponse_NOT_SERVING)
		healthpb.RegisterHealthServer(srv, hs)
	})
	resp, err := healthpb.NewHealthClient(e.viaPxy).Check(ctxT(t), &healthpb.HealthCheckRequest{Service: "infergate"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("status %v, want the proxy's own NOT_SERVING", resp.Status)
	}
	if _, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), simpleRequest("simple", 16)); err != nil {
		t.Errorf("proxied call: %v", err)
	}
}

func TestConcurrentCallsStress(t *testing.T) {
	e := newEnv(t)
	ks := kservepb.NewGRPCInferenceServiceClient(e.viaPxy)
	const workers, calls = 8, 25
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				req := simpleRequest("simple", 256*(w+1))
				if i%5 == 0 {
					stream, err := ks.ModelStreamInfer(ctxT(t))
					if err == nil {
						err = stream.Send(req)
					}
					if err == nil {
						_, err = stream.Recv()
					}
					if err == nil {
						err = stream.CloseSend()
					}
					if err == nil {
						if _, err = stream.Recv(); err == io.EOF {
							err = nil
						}
					}
					if err != nil {
						errc <- err
						return
					}
					continue
				}
				resp, err := ks.ModelInfer(ctxT(t), req)
				if err != nil {
					errc <- err
					return
				}
				if len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0]) != 256*(w+1) {
					errc <- errors.New("wrong response size")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	for range workers * calls {
		e.rec.next(t)
	}
	if v := e.rec.InFlight(e.upstream).Value(); v != 0 {
		t.Errorf("in flight %d after the calls", v)
	}
}
