package proxy

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/methods"
)

// TestUpstreamTimeoutBoundsCallsWithoutDeadline: a unary call without a
// client deadline to a hung upstream ends with DEADLINE_EXCEEDED naming
// the proxy's timeout; the upstream saw a deadline; a call with its own
// deadline keeps it.
func TestUpstreamTimeoutBoundsCallsWithoutDeadline(t *testing.T) {
	e := newEnv(t, WithUpstreamTimeout(50*time.Millisecond))
	kc := kservepb.NewGRPCInferenceServiceClient(e.viaPxy)
	_, err := kc.ModelInfer(context.Background(), simpleRequest(modelBlock, 16))
	if s := status.Convert(err); s.Code() != codes.DeadlineExceeded || !strings.Contains(s.Message(), "upstream timeout of 50ms") {
		t.Fatalf("no-deadline call to a hung upstream: %v, want DEADLINE_EXCEEDED naming the timeout", err)
	}
	if rep := <-e.b.blocked; !rep.hadDeadline {
		t.Error("the upstream call carried no deadline")
	}

	// A call with its own deadline: the client's deadline decides.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = kc.ModelInfer(ctx, simpleRequest(modelBlock, 16))
	if status.Code(err) != codes.DeadlineExceeded || strings.Contains(status.Convert(err).Message(), "upstream timeout") {
		t.Fatalf("call with its own deadline: %v", err)
	}
	<-e.b.blocked
}

// TestUpstreamOwnDeadlineExceededStands: an upstream that answers
// DEADLINE_EXCEEDED by itself, long before the proxy's timeout, keeps its
// message: the proxy rewrites only when its own deadline passed.
func TestUpstreamOwnDeadlineExceededStands(t *testing.T) {
	e := newEnv(t, WithUpstreamTimeout(time.Hour))
	_, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(context.Background(), simpleRequest(modelTimeout, 16))
	if s := status.Convert(err); s.Code() != codes.DeadlineExceeded || s.Message() != "model server: inference timed out" {
		t.Fatalf("got %v, want the upstream's own DEADLINE_EXCEEDED unchanged", err)
	}
}

// TestProxyTimeoutVerdict: the rewrite to "the proxy's upstream timeout
// passed" follows the clock, not the context's timer: an upstream that
// answered at the deadline (it got the deadline as grpc-timeout) can come
// back before the timer fired on a loaded machine, and CI once saw the
// bare "context deadline exceeded" for it. Any other ending keeps its
// own status.
func TestProxyTimeoutVerdict(t *testing.T) {
	p := &Proxy{upstreamTimeout: time.Second}
	bound := time.Unix(1000, 0)
	late := status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	for _, c := range []struct {
		name       string
		bound, now time.Time
		clientGone bool
		err        error
		want       bool
	}{
		{"the proxy set no deadline", time.Time{}, bound, false, late, false},
		{"an early upstream answer keeps its word", bound, bound.Add(-time.Millisecond), false, late, false},
		{"at the deadline, timer or not", bound, bound, false, late, true},
		{"after it", bound, bound.Add(time.Millisecond), false, late, true},
		{"the client left", bound, bound, true, late, false},
		{"another code", bound, bound, false, status.Error(codes.Unavailable, "x"), false},
		{"no error", bound, bound, false, nil, false},
	} {
		got := p.timeoutVerdict(c.bound, c.now, c.clientGone, c.err)
		var pt *proxyTimeoutError
		if errors.As(got, &pt) != c.want {
			t.Errorf("%s: timeoutVerdict = %v, want the proxy's timeout: %v", c.name, got, c.want)
		}
		if !c.want && got != c.err {
			t.Errorf("%s: timeoutVerdict changed %v into %v", c.name, c.err, got)
		}
	}
}

// TestStreamsAreNotBounded: the upstream timeout does not cut streams.
func TestStreamsAreNotBounded(t *testing.T) {
	e := newEnv(t, WithUpstreamTimeout(time.Nanosecond))
	stream, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelStreamInfer(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := stream.Send(simpleRequest("simple", 16)); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("stream under a 1ns unary timeout: %v", err)
		}
	}
	stream.CloseSend()
}

// TestMaxInFlight: calls beyond the cap are rejected at once with
// RESOURCE_EXHAUSTED and counted; when a slot frees, calls go through.
func TestMaxInFlight(t *testing.T) {
	e := newEnv(t, WithMaxInFlight(2))
	kc := kservepb.NewGRPCInferenceServiceClient(e.viaPxy)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := kc.ModelInfer(ctxT(t), simpleRequest(modelSlow, 16)); err != nil {
				t.Errorf("held call: %v", err)
			}
		})
	}
	<-e.b.entered
	<-e.b.entered
	_, err := kc.ModelInfer(ctxT(t), simpleRequest("simple", 16))
	if s := status.Convert(err); s.Code() != codes.ResourceExhausted || !strings.Contains(s.Message(), "too many calls in flight (2)") {
		t.Fatalf("third call: %v, want RESOURCE_EXHAUSTED", err)
	}
	if st := e.proxy.Stats(); st.RejectedInFlight != 1 || st.InFlight != 2 {
		t.Errorf("stats %+v, want 1 rejected, 2 in flight", st)
	}
	close(e.b.release)
	wg.Wait()
	if _, err := kc.ModelInfer(ctxT(t), simpleRequest("simple", 16)); err != nil {
		t.Fatalf("call after the slots freed: %v", err)
	}
}

// panicDirector panics for the model-less health method, routes the rest.
type panicDirector struct{ up *Upstream }

func (d panicDirector) Direct(_ context.Context, method string) (*Upstream, error) {
	if method == methods.HealthCheck {
		panic("director bug")
	}
	return d.up, nil
}

// TestPanicIsOneFailedCall: a panic in the handler (here the director)
// fails that call with INTERNAL, is counted and logged, and the next call
// is served.
func TestPanicIsOneFailedCall(t *testing.T) {
	b := startBackend(t)
	up, err := DialUpstream(b.addr, UpstreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	var logs syncBuffer
	p, err := New(panicDirector{up}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	cc := dial(t, serve(t, p.NewServer()))
	err = cc.Invoke(ctxT(t), methods.HealthCheck, NewFrame(nil), new(Frame), grpc.ForceCodecV2(Codec()))
	if status.Code(err) != codes.Internal {
		t.Fatalf("call whose handler panicked: %v, want INTERNAL", err)
	}
	if _, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctxT(t), simpleRequest("simple", 16)); err != nil {
		t.Fatalf("call after the panic: %v", err)
	}
	if n := p.Stats().Panics; n != 1 {
		t.Errorf("panics counted: %d, want 1", n)
	}
	if !strings.Contains(logs.String(), "director bug") || !strings.Contains(logs.String(), "stack=") {
		t.Errorf("panic not logged with its stack:\n%s", logs.String())
	}
}

// TestPanicInStreamPump: a panic inside a pump goroutine, which the
// interceptor does not cover, fails that stream with INTERNAL.
func TestPanicInStreamPump(t *testing.T) {
	e := newEnv(t)
	testHookFrame = func() { panic("pump bug") }
	t.Cleanup(func() { testHookFrame = nil })
	stream, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelStreamInfer(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(simpleRequest("simple", 16))
	if _, err := stream.Recv(); status.Code(err) != codes.Internal {
		t.Fatalf("stream whose pump panicked: %v, want INTERNAL", err)
	}
	testHookFrame = nil
	if _, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), simpleRequest("simple", 16)); err != nil {
		t.Fatalf("call after the panic: %v", err)
	}
	if n := e.proxy.Stats().Panics; n != 1 {
		t.Errorf("panics counted: %d, want 1", n)
	}
}

// TestRequestLoggerWhateverTheLevel: request lines go out even when the
// main logger is at warn.
func TestRequestLoggerWhateverTheLevel(t *testing.T) {
	var main, reqs syncBuffer
	e := newEnv(t,
		WithLogger(slog.New(slog.NewTextHandler(&main, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		WithRequestLogger(slog.New(slog.NewTextHandler(&reqs, nil))))
	if _, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), simpleRequest("simple", 16)); err != nil {
		t.Fatal(err)
	}
	e.rec.next(t)
	if !strings.Contains(reqs.String(), "model=simple") || strings.Contains(main.String(), "model=simple") {
		t.Errorf("request line: requests log %q, main log %q", reqs.String(), main.String())
	}
}

// TestKeepaliveDefaultsSuitDefaultServers: the default upstream pings are
// no more often than gRPC servers allow by default (5 minutes), and only
// while calls are in flight.
func TestKeepaliveDefaultsSuitDefaultServers(t *testing.T) {
	o := UpstreamOptions{}.withDefaults("x:1")
	if o.Keepalive.Time < 5*time.Minute || o.Keepalive.PermitWithoutStream {
		t.Errorf("default keepalive %+v: pings more often than every 5 minutes or without calls", o.Keepalive)
	}
	set := UpstreamOptions{Keepalive: keepalive.ClientParameters{Time: time.Minute}}.withDefaults("x:1")
	if set.Keepalive.Time != time.Minute || set.Keepalive.Timeout == 0 {
		t.Errorf("a configured keepalive time is kept with a timeout: %+v", set.Keepalive)
	}
}
