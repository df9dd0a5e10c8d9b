package proxy

import (
	"context"
	"github.com/infergate/infergate/proxy/pool"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/flow"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proxy/flowstats"
)

// slotServer is a model server with one execution slot: calls queue on
// it, each taking its time alone. It counts the calls queued there when
// each arrives and the calls it served per tenant.
type slotServer struct {
	kservepb.UnimplementedGRPCInferenceServiceServer
	took    time.Duration
	slot    sync.Mutex
	queued  atomic.Int32
	maxSeen atomic.Int32
	mu      sync.Mutex
	served  map[string]int
}

func (s *slotServer) ModelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	tenant := ""
	if v := md.Get("x-tenant"); len(v) > 0 {
		tenant = v[0]
	}
	q := s.queued.Add(1)
	for {
		m := s.maxSeen.Load()
		if q <= m || s.maxSeen.CompareAndSwap(m, q) {
			break
		}
	}
	s.slot.Lock()
	s.queued.Add(-1)
	time.Sleep(s.took)
	s.slot.Unlock()
	s.mu.Lock()
	s.served[tenant]++
	s.mu.Unlock()
	return &kservepb.ModelInferResponse{ModelName: req.ModelName, Id: tenant}, nil
}

// With flow control a one-slot server's own queue stays short whatever
// the offered load (the order is decided in the proxy), and two tenants
// of one band flooding it at 3:1 concurrency are served 1:1; without it,
// the server's queue holds the flood and the heavier tenant wins.
func TestFlowControlKeepsTheServerQueueShortAndFair(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			mn := newMemNet()
			srv := &slotServer{took: 2 * time.Millisecond, served: map[string]int{}}
			gs := grpc.NewServer()
			kservepb.RegisterGRPCInferenceServiceServer(gs, srv)
			mn.serve(t, "slot", gs)
			up := mn.upstream(t, "slot")
			p, err := New(StaticDirector(up), WithFlowControl(FlowSettings{Enabled: on}))
			if err != nil {
				t.Fatal(err)
			}
			front := p.NewServer()
			mn.serve(t, "proxy", front)
			t.Cleanup(func() { front.Stop(); p.Close(); up.Close() })
			client := kservepb.NewGRPCInferenceServiceClient(mn.client(t, "proxy"))

			ctx, stop := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			caller := func(tenant string) {
				defer wg.Done()
				cctx := metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant)
				for ctx.Err() == nil {
					_, _ = client.ModelInfer(cctx, &kservepb.ModelInferRequest{ModelName: "m"})
				}
			}
			for range 24 {
				wg.Add(1)
				go caller("B")
			}
			for range 8 {
				wg.Add(1)
				go caller("C")
			}
			for {
				srv.mu.Lock()
				n := srv.served["B"] + srv.served["C"]
				srv.mu.Unlock()
				if n >= 400 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			stop()
			wg.Wait()
			srv.mu.Lock()
			b, c := srv.served["B"], srv.served["C"]
			srv.mu.Unlock()
			max := srv.maxSeen.Load()
			t.Logf("served B %d, C %d; most calls queued at the server %d", b, c, max)
			ratio := float64(b) / float64(c)
			if on {
				if max > 4 {
					t.Errorf("the server's own queue held %d calls, want a few: the order decided in the proxy", max)
				}
				if ratio < 0.8 || ratio > 1.25 {
					t.Errorf("B (24 callers) got %d, C (8 callers) %d: want about equal shares", b, c)
				}
				st := up.gatesOf()["m"].Stats()
				if st.Waited[flow.Standard] == 0 {
					t.Errorf("no call waited at the gate: %+v", st)
				}
			} else if max < 16 || ratio < 2 {
				t.Errorf("without flow control: queue %d, B:C %.1f; want the flood at the server and B ahead (else this test shows nothing)", max, ratio)
			}
		})
	}
}

// A tenant header of 1 MiB is not kept as a tenant name.
func TestFlowTenantNameBounded(t *testing.T) {
	cfg := &flowConfig{FlowSettings: FlowSettings{TenantHeader: "x-tenant", DefaultTenant: "default"}}
	huge := strings.Repeat("t", 1<<20)
	c := cfg.flowCall(metadata.Pairs("x-tenant", huge), nil, nil, time.Time{})
	if c.Tenant != flowstats.OtherTenant {
		t.Errorf("a 1 MiB tenant name kept (%d bytes), want %q", len(c.Tenant), flowstats.OtherTenant)
	}
	if c := cfg.flowCall(metadata.Pairs("x-tenant", "online"), nil, nil, time.Time{}); c.Tenant != "online" {
		t.Errorf("tenant %q, want online", c.Tenant)
	}
}

// A pool whose replicas list their models makes no gate for a name none
// of them holds: made-up names cannot use up the gates of real models.
func TestFlowNoGateForModelsNoneHolds(t *testing.T) {
	u := &Upstream{}
	u.dest.Store(&upstreamDest{name: "pool"})
	var list []*Endpoint
	for _, addr := range []string{"a", "b"} {
		e := pool.NewEndpoint(addr, "", nil)
		e.AssumeUp()
		e.SetReady(map[string]bool{"resnet50": true})
		list = append(list, e)
	}
	u.Replace(list)
	cfg := &flowConfig{}
	if g := u.gate(cfg, "made-up"); g != nil {
		t.Error("a gate for a model no replica holds")
	}
	if g := u.gate(cfg, "resnet50"); g == nil {
		t.Error("no gate for a model the replicas hold")
	}
}

// A call that carried no deadline and is refused for the deadline the
// proxy's upstream timeout gave it is told so ("its deadline" alone
// would send its owner looking for a deadline it never set), and told
// when to come back.
func TestFlowRefusalSaysWhyAndWhenToComeBack(t *testing.T) {
	mn := newMemNet()
	srv := &slotServer{took: 10 * time.Millisecond, served: map[string]int{}}
	gs := grpc.NewServer()
	kservepb.RegisterGRPCInferenceServiceServer(gs, srv)
	mn.serve(t, "slot", gs)
	up := mn.upstream(t, "slot")
	p, err := New(StaticDirector(up), WithFlowControl(FlowSettings{Enabled: true}), WithUpstreamTimeout(60*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	front := p.NewServer()
	mn.serve(t, "proxy", front)
	t.Cleanup(func() { front.Stop(); p.Close(); up.Close() })
	client := kservepb.NewGRPCInferenceServiceClient(mn.client(t, "proxy"))

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var wg sync.WaitGroup
	msgs := make(chan string, 1)
	var pushback atomic.Value
	for range 24 { // 24 calls of 10 ms on one slot: most cannot be answered in 60 ms
		wg.Go(func() {
			for ctx.Err() == nil {
				var tr metadata.MD
				_, err := client.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "m"}, grpc.Trailer(&tr))
				if err != nil && strings.Contains(err.Error(), "flow control") {
					select {
					case msgs <- err.Error():
						pushback.Store(tr.Get("grpc-retry-pushback-ms"))
					default:
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	var msg string
	select {
	case msg = <-msgs:
	case <-time.After(30 * time.Second):
	}
	stop()
	wg.Wait()
	if !strings.Contains(msg, "carried no deadline") || !strings.Contains(msg, "upstream timeout of 60ms") {
		t.Errorf("a refusal of a call without a deadline says %q, want the proxy's upstream timeout of 60ms named", msg)
	}
	// The client is told when to come back (gRPC's retry pushback):
	// about when the calls waiting now have gone, 10 ms each.
	v, _ := pushback.Load().([]string)
	t.Logf("refused: %s; grpc-retry-pushback-ms %v", msg, v)
	if ms, err := strconv.Atoi(strings.Join(v, "")); err != nil || ms < 10 || ms > 1000 {
		t.Errorf("a refusal's grpc-retry-pushback-ms: %q, want about the waiting calls' time (10 ms each)", v)
	}
}
