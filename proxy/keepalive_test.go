package proxy

import (
	"context"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// pipeListener is a net.Listener over net.Pipe: inside a synctest bubble
// its reads block durably, so the bubble's fake clock can run the HTTP/2
// keepalive timers of both sides for minutes in no real time.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// longCall makes one call that the upstream, a grpc-go server with the
// default keepalive enforcement (MinTime 5 minutes, 2 strikes allowed),
// answers after wait with no data on the connection meanwhile. It runs in
// a synctest bubble: the wait is fake time.
func longCall(t *testing.T, ka keepalive.ClientParameters, wait time.Duration) error {
	lis := newPipeListener()
	srv := grpc.NewServer() // default keepalive enforcement
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Slow", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Wait", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req wrapperspb.StringValue
			if err := dec(&req); err != nil {
				return nil, err
			}
			select {
			case <-time.After(wait):
				return &req, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}},
	}, nil)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	up, err := DialUpstream("passthrough:///pipe", UpstreamOptions{
		Keepalive: ka, Conns: 1,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(lis.dial)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	var resp wrapperspb.StringValue
	return up.Conn().Invoke(t.Context(), "/test.Slow/Wait", wrapperspb.String("x"), &resp, grpc.ForceCodecV2(Codec()))
}

// TestDefaultKeepaliveSurvivesDefaultServer: a call of 20 (fake) minutes
// with no data flowing outlives four of the default keepalive's pings
// against a server with gRPC's default enforcement. The old default, 30 s,
// fails it with UNAVAILABLE after three strikes (at about 2 minutes): the
// test tells the two apart.
func TestDefaultKeepaliveSurvivesDefaultServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if err := longCall(t, keepalive.ClientParameters{}, 20*time.Minute); err != nil {
			t.Errorf("20-minute call with the default keepalive: %v", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		err := longCall(t, keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}, 20*time.Minute)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("20-minute call pinging every 30s: %v, want UNAVAILABLE (too_many_pings)", err)
		}
	})
}
