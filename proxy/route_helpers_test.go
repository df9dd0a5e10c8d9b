package proxy

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// Behaviours of a modelServer.
const (
	behaveOK    int32 = iota
	behaveHang        // block until the call's context ends
	behaveError       // fail with the server's code
	behaveSlow        // answer after the server's delay
)

// modelServer is a KServe v2 model server for routing tests: it answers
// every model, says which server answered (response id) and which model it
// was asked for (model_name), and misbehaves on demand.
type modelServer struct {
	kservepb.UnimplementedGRPCInferenceServiceServer
	name     string
	addr     string
	srv      *grpc.Server
	lis      net.Listener
	behave   atomic.Int32
	code     atomic.Int32
	delay    atomic.Int64
	conf     atomic.Value // float32: the max of the probs output
	only     atomic.Value // string: misbehave only for this model name ("" all)
	calls    atomic.Int64
	mu       sync.Mutex
	asked    []string // model names asked, in order
	versions []string
}

func startModelServer(t *testing.T, name string) *modelServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &modelServer{name: name, addr: lis.Addr().String(), lis: lis}
	m.conf.Store(float32(0.9))
	m.only.Store("")
	m.code.Store(int32(codes.Unavailable))
	m.start()
	t.Cleanup(func() { m.srv.Stop() })
	return m
}

func (m *modelServer) start() {
	m.srv = grpc.NewServer()
	kservepb.RegisterGRPCInferenceServiceServer(m.srv, m)
	lis := m.lis
	go func() { _ = m.srv.Serve(lis) }()
}

// kill stops the server and its listener: connections are refused.
func (m *modelServer) kill() { m.srv.Stop() }

// restart serves again on the same address.
func (m *modelServer) restart(t *testing.T) {
	t.Helper()
	lis, err := net.Listen("tcp", m.addr)
	if err != nil {
		t.Fatal(err)
	}
	m.lis = lis
	m.start()
	t.Cleanup(func() { m.srv.Stop() })
}

func (m *modelServer) set(b int32) { m.behave.Store(b) }

func (m *modelServer) ModelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	m.calls.Add(1)
	m.mu.Lock()
	m.asked = append(m.asked, req.ModelName)
	m.versions = append(m.versions, req.ModelVersion)
	m.mu.Unlock()
	behave := m.behave.Load()
	if only := m.only.Load().(string); only != "" && only != req.ModelName {
		behave = behaveOK
	}
	switch behave {
	case behaveHang:
		<-ctx.Done()
		return nil, ctx.Err()
	case behaveError:
		return nil, status.Error(codes.Code(m.code.Load()), m.name+" fails")
	case behaveSlow:
		select {
		case <-time.After(time.Duration(m.delay.Load())):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return m.answer(req), nil
}

func (m *modelServer) answer(req *kservepb.ModelInferRequest) *kservepb.ModelInferResponse {
	c := m.conf.Load().(float32)
	return &kservepb.ModelInferResponse{ModelName: req.ModelName, ModelVersion: req.ModelVersion, Id: m.name,
		Outputs: []*kservepb.ModelInferResponse_InferOutputTensor{{
			Name: "probs", Datatype: "FP32", Shape: []int64{1, 3},
			Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{c, (1 - c) / 2, (1 - c) / 2}},
		}}}
}

func (m *modelServer) ModelStreamInfer(s kservepb.GRPCInferenceService_ModelStreamInferServer) error {
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		m.calls.Add(1)
		m.mu.Lock()
		m.asked = append(m.asked, req.ModelName)
		m.mu.Unlock()
		if err := s.Send(&kservepb.ModelStreamInferResponse{InferResponse: m.answer(req)}); err != nil {
			return err
		}
	}
}

// routeEnv is a proxy with a router in front of a primary and an edge
// model server.
type routeEnv struct {
	pri, edge *modelServer
	router    *Router
	proxy     *Proxy
	rec       *fakeRecorder
	client    kservepb.GRPCInferenceServiceClient
	priUp     *Upstream
}

// newRouteEnv routes model "big" to the primary with "small" on the edge
// as fallback; change tweaks the route and options first.
func newRouteEnv(t *testing.T, change func(rc *RouteConfig, ro *RouterOptions, bc *BreakerConfig)) *routeEnv {
	t.Helper()
	return newRouteEnvWith(t, change)
}

// newRouteEnvWith is newRouteEnv with more options for the proxy.
func newRouteEnvWith(t *testing.T, change func(rc *RouteConfig, ro *RouterOptions, bc *BreakerConfig), opts ...Option) *routeEnv {
	t.Helper()
	e := &routeEnv{pri: startModelServer(t, "primary"), edge: startModelServer(t, "edge"), rec: newFakeRecorder()}
	pri, err := DialUpstream(e.pri.addr, UpstreamOptions{Name: "primary", Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	edge, err := DialUpstream(e.edge.addr, UpstreamOptions{Name: "edge", Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.priUp = pri
	rc := RouteConfig{Model: "big", Upstream: pri, Fallback: &FallbackTarget{Upstream: edge, Model: "small"}, HedgeAfter: -1}
	bc := BreakerConfig{OpenFor: 100 * time.Millisecond, Probes: 2}
	ro := RouterOptions{Budget: BudgetConfig{Ratio: 1, MinPerSecond: 1000}, Breakers: map[*Upstream]BreakerConfig{}}
	if change != nil {
		change(&rc, &ro, &bc)
	}
	ro.Routes = append(ro.Routes, rc)
	ro.Breakers[pri] = bc
	r, err := NewRouter(ro)
	if err != nil {
		t.Fatal(err)
	}
	e.router = r
	p, err := New(StaticDirector(pri), append([]Option{WithRouter(r), WithRecorder(e.rec)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = p
	srv := p.NewServer()
	addr := serve(t, srv)
	t.Cleanup(func() {
		srv.Stop()
		r.Close()
		p.Close()
		edge.Close()
	})
	e.client = kservepb.NewGRPCInferenceServiceClient(dial(t, addr))
	return e
}

// result is one call's outcome as a client sees it.
type result struct {
	code   codes.Code
	server string // which model server answered
	model  string // the model_name of the answer
	route  string // x-infergate-route
	reason string
}

// infer makes one call to "big" with a deadline.
func (e *routeEnv) infer(t *testing.T, timeout time.Duration) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var hdr metadata.MD
	resp, err := e.client.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "big", ModelVersion: "3"}, grpc.Header(&hdr))
	r := result{code: status.Code(err)}
	if v := hdr.Get(HeaderRoute); len(v) > 0 {
		r.route = v[0]
	}
	if v := hdr.Get(HeaderRouteReason); len(v) > 0 {
		r.reason = v[0]
	}
	if err == nil {
		r.server, r.model = resp.Id, resp.ModelName
	}
	return r
}

// burst makes n concurrent calls and returns their results; every call
// must end (a hang would stop the test at its deadline).
func (e *routeEnv) burst(t *testing.T, n int, timeout time.Duration) []result {
	t.Helper()
	out := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = e.infer(t, timeout) })
	}
	wg.Wait()
	return out
}

// tally counts results by "server/route" or by failure code.
func tally(rs []result) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		if r.code != codes.OK {
			m[r.code.String()]++
			continue
		}
		m[r.server+"/"+r.reason]++
	}
	return m
}

// eventually polls cond until it holds or the test's patience ends.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
