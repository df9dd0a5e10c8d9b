package proxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proxy/route"
)

// tcpModelServer is a modelServer on a loopback TCP port (the relay
// forwards only to addresses it dials itself).
func tcpModelServer(t *testing.T, name string) (*modelServer, string) {
	t.Helper()
	m := &modelServer{name: name}
	m.conf.Store(float32(0.9))
	m.only.Store("")
	m.code.Store(int32(codes.Unavailable))
	m.srv = grpc.NewServer()
	kservepb.RegisterGRPCInferenceServiceServer(m.srv, m)
	return m, serve(t, m.srv)
}

// heldNothing fails t unless, once every call has ended, nothing a call
// took is still held: a place under the in-flight cap, the in-flight
// gauge, an endpoint's slot and its per-model slot, a gate's turn. The
// relay may record a call a moment after its client has the answer, so
// it waits for that (a generous bound, not a timing).
func heldNothing(t *testing.T, p *Proxy, rec *fakeRecorder, ups ...*Upstream) {
	t.Helper()
	held := func() string {
		if n := p.calls.Load(); n != 0 {
			return fmt.Sprintf("%d places under the in-flight cap", n)
		}
		for _, u := range ups {
			if rec != nil {
				if g := rec.InFlight(u.Name()).Value(); g != 0 {
					return fmt.Sprintf("in-flight gauge of %s at %d", u.Name(), g)
				}
			}
			for _, e := range u.Endpoints() {
				if n := e.InFlight(); n != 0 {
					return fmt.Sprintf("endpoint %s holds %d calls", e.Address(), n)
				}
				for _, m := range []string{"plain", "batched", "hedged"} {
					if n := e.ModelInFlight(m); n != 0 {
						return fmt.Sprintf("endpoint %s holds %d calls of %s", e.Address(), n, m)
					}
				}
			}
			for m, g := range u.gatesOf() {
				if s := g.Stats(); s.InFlight != 0 || s.Waiting != 0 {
					return fmt.Sprintf("gate of %s: %d turns held, %d waiting", m, s.InFlight, s.Waiting)
				}
			}
		}
		return ""
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := held()
		if h == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after every call ended: %s", h)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Whatever path a call ends on, what its handle took is given back, once:
// answered, failed by the replica, its client gone mid-call, its deadline
// passed, a hedge that lost, sent again after its connection died,
// batched, with flow control ordering it and without; forwarded by the
// relay or served (the package runs again with the relay off).
func TestHandleGivesBackEverythingOnEveryPath(t *testing.T) {
	for _, flowOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "flow off", true: "flow on"}[flowOn], func(t *testing.T) {
			a, addrA := tcpModelServer(t, "a")
			b, addrB := tcpModelServer(t, "b")
			rec := newFakeRecorder()
			single, err := DialUpstream(addrA, UpstreamOptions{Name: "single"})
			if err != nil {
				t.Fatal(err)
			}
			pool, err := DialUpstream(addrA+","+addrB, UpstreamOptions{Name: "pool"})
			if err != nil {
				t.Fatal(err)
			}
			bat, err := batcher.New(batcher.Config{Models: map[string]batcher.Policy{
				"batched": {Mode: batcher.Static, MaxSize: 4, MaxDelay: time.Millisecond},
			}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := route.NewRouter(route.RouterOptions{
				Routes: []route.RouteConfig{{Model: "hedged", Upstream: pool, HedgeAfter: 20 * time.Millisecond}},
				Budget: BudgetConfig{Ratio: 1, MinPerSecond: 1000},
			})
			if err != nil {
				t.Fatal(err)
			}
			clientOf := func(up *Upstream, opts ...Option) (*Proxy, kservepb.GRPCInferenceServiceClient) {
				p, err := New(StaticDirector(up), append([]Option{WithRecorder(rec)}, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				if flowOn {
					p.SetFlowControl(FlowSettings{Enabled: true})
				}
				t.Cleanup(func() { _ = p.Close() })
				return p, kservepb.NewGRPCInferenceServiceClient(dial(t, serveFront(t, p, p.NewServer())))
			}
			t.Cleanup(func() { r.Close(); _ = bat.Close() })
			ps, single1 := clientOf(single, WithBatcher(bat))
			pp, pooled := clientOf(pool, WithRouter(r))

			call := func(c kservepb.GRPCInferenceServiceClient, model string, timeout time.Duration) error {
				ctx, cancel := context.WithTimeout(t.Context(), timeout)
				defer cancel()
				_, err := c.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: model})
				return err
			}
			// Answered, forwarded or served, batched or not.
			for range 4 {
				if err := call(single1, "plain", 5*time.Second); err != nil {
					t.Fatal(err)
				}
				if err := call(single1, "batched", 5*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			// Failed by the replica.
			a.set(behaveError)
			if err := call(single1, "plain", 5*time.Second); status.Code(err) != codes.Unavailable {
				t.Fatalf("a failing replica: %v", err)
			}
			if err := call(single1, "batched", 5*time.Second); status.Code(err) != codes.Unavailable {
				t.Fatalf("a failing replica, batched: %v", err)
			}
			// The deadline passes while the replica hangs.
			a.set(behaveHang)
			if err := call(single1, "plain", 50*time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("a hung replica: %v", err)
			}
			if err := call(single1, "batched", 50*time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("a hung replica, batched: %v", err)
			}
			// The client leaves mid-call.
			ctx, cancel := context.WithCancel(t.Context())
			before := a.calls.Load()
			errc := make(chan error, 1)
			go func() {
				_, err := single1.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "plain"})
				errc <- err
			}()
			for a.calls.Load() == before {
				time.Sleep(time.Millisecond)
			}
			cancel()
			if err := <-errc; status.Code(err) != codes.Canceled {
				t.Fatalf("a client gone: %v", err)
			}
			heldNothing(t, ps, rec, single)

			// A hedge that lost: a hung on the pool, every call answered
			// by b's hedge, the primary's attempt abandoned.
			for range 6 {
				if err := call(pooled, "hedged", 5*time.Second); err != nil {
					t.Fatalf("hedged: %v", err)
				}
			}
			// Sent again after its connection died: a is killed under a
			// call it holds.
			before = a.calls.Load()
			go func() { errc <- call(pooled, "plain", 5*time.Second) }()
			for a.calls.Load() == before && b.calls.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			a.srv.Stop()
			if err := <-errc; err != nil && status.Code(err) != codes.Unavailable {
				t.Fatalf("the replica died under the call: %v", err)
			}
			heldNothing(t, pp, rec, pool)
		})
	}
}
