package proxy

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proxy/pool"
	"github.com/infergate/infergate/proxy/route"
)

// pool is an upstream of the named memNet servers, one endpoint each.
func (n *memNet) pool(t *testing.T, names ...string) *Upstream {
	t.Helper()
	u := &Upstream{}
	u.Init(BalanceLatency, 0)
	u.dest.Store(&upstreamDest{name: "pool"})
	var list []*Endpoint
	for _, name := range names {
		e := pool.NewEndpoint(name, "", []*grpc.ClientConn{n.client(t, name)})
		e.AssumeUp()
		list = append(list, e)
	}
	u.Replace(list)
	return u
}

// A routed model whose primary is a pool and has no fallback: a call
// stuck on one replica is hedged to another replica of the pool, whose
// answer is the primary's (no route header); a call of a sequence is
// never sent to a second replica.
func TestHedgeToAnotherEndpoint(t *testing.T) {
	mn := newMemNet()
	stuck := startModelServer(t, mn, "stuck")
	startModelServer(t, mn, "fine")
	stuck.set(behaveHang)
	up := mn.pool(t, "stuck", "fine")
	r, err := route.NewRouter(route.RouterOptions{
		Routes: []route.RouteConfig{{Model: "big", Upstream: up, HedgeAfter: 20 * time.Millisecond}},
		Budget: BudgetConfig{Ratio: 1, MinPerSecond: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(StaticDirector(up), WithRouter(r))
	if err != nil {
		t.Fatal(err)
	}
	srv := p.NewServer()
	mn.serve(t, "proxy", srv)
	t.Cleanup(func() { srv.Stop(); r.Close(); p.Close() })
	client := kservepb.NewGRPCInferenceServiceClient(mn.client(t, "proxy"))

	infer := func(req *kservepb.ModelInferRequest) (string, string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var hdr metadata.MD
		resp, err := client.ModelInfer(ctx, req, grpc.Header(&hdr))
		if err != nil {
			return "", "", err
		}
		return resp.Id, firstOf(hdr.Get(grpcwire.HeaderRoute)), nil
	}
	for i := range 20 {
		id, route, err := infer(&kservepb.ModelInferRequest{ModelName: "big"})
		if err != nil || id != "fine" || route != "" {
			t.Fatalf("call %d: answered by %q, route %q, %v; want the fine replica, as the primary", i, id, route, err)
		}
	}
	if stuck.calls.Load() == 0 {
		t.Fatal("no call went to the stuck replica: nothing was hedged")
	}
	st := &r.Route("big").Live().Counters
	if won := st.HedgesWon.Load(); won == 0 || won > uint64(stuck.calls.Load()) {
		t.Errorf("hedges won %d, stuck replica's calls %d", won, stuck.calls.Load())
	}

	// A sequence pinned to the stuck replica waits for it: sent to
	// another replica, its state would advance twice.
	stuck.set(behaveSlow)
	stuck.delay.Store(int64(100 * time.Millisecond))
	// The hedged calls it never answered made it costly, and the picker
	// now avoids it for new sequences (as it should a replica that
	// hangs): start the pool's costs afresh, so that sequences land on
	// both replicas again.
	for _, e := range up.Endpoints() {
		e.ForgetCost()
	}
	for id := int64(1); id <= 40; id++ {
		before := stuck.calls.Load()
		req := &kservepb.ModelInferRequest{ModelName: "big", Parameters: map[string]*kservepb.InferParameter{
			"sequence_id":    {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: id}},
			"sequence_start": {ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: true}},
		}}
		who, _, err := infer(req)
		if err != nil {
			t.Fatal(err)
		}
		if stuck.calls.Load() > before && who != "stuck" {
			t.Fatalf("a sequence call sent to the slow replica was answered by %q: sent twice", who)
		}
		if who == "stuck" {
			return
		}
	}
	t.Fatal("no sequence went to the slow replica in 40")
}

func firstOf(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// A call whose replica dies under it (its connection closed mid-call) is
// sent again to another replica of the pool, from the retry budget; a
// model whose route says it is not idempotent is not, and the client
// gets the failure.
func TestResendWhenConnectionDies(t *testing.T) {
	for _, once := range []bool{false, true} {
		t.Run(map[bool]string{false: "idempotent", true: "not idempotent"}[once], func(t *testing.T) {
			mn := newMemNet()
			dying := startModelServer(t, mn, "dying")
			startModelServer(t, mn, "fine")
			dying.set(behaveHang)
			up := mn.pool(t, "dying", "fine")
			for range 100 { // the first pick is the dying one
				up.Begin(up.Endpoints()[1], "")
			}
			ro := route.RouterOptions{Budget: BudgetConfig{Ratio: 1, MinPerSecond: 1000}}
			if once {
				ro.Routes = []route.RouteConfig{{Model: "big", Upstream: up, NonIdempotent: true, HedgeAfter: -1}}
			}
			r, err := route.NewRouter(ro)
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(StaticDirector(up), WithRouter(r))
			if err != nil {
				t.Fatal(err)
			}
			srv := p.NewServer()
			mn.serve(t, "proxy", srv)
			t.Cleanup(func() { srv.Stop(); r.Close(); p.Close() })
			client := kservepb.NewGRPCInferenceServiceClient(mn.client(t, "proxy"))

			type answer struct {
				id  string
				err error
			}
			done := make(chan answer, 1)
			go func() {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				resp, err := client.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "big"})
				if err != nil {
					done <- answer{err: err}
					return
				}
				done <- answer{id: resp.Id}
			}()
			for dying.calls.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			dying.kill()
			a := <-done
			switch {
			case !once && (a.err != nil || a.id != "fine"):
				t.Errorf("answered by %q, %v; want the fine replica", a.id, a.err)
			case once && a.err == nil:
				t.Errorf("a model that is not idempotent was sent again (answered by %q)", a.id)
			}
		})
	}
}
