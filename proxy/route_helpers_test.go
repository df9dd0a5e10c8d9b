package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proxy/route"
)

// Behaviours of a modelServer.
const (
	behaveOK    int32 = iota
	behaveHang        // block until the call's context ends
	behaveError       // fail with the server's code
	behaveSlow        // answer after the server's delay
)

// memNet is an in-memory network of named listeners over net.Pipe for
// the routing tests. Inside a synctest bubble every wait on it is durable,
// so the bubble's fake clock runs hedge delays, deadlines, breakers' open
// times and reconnection backoffs in no real time, and the same steps
// give the same outcome however busy the machine is. Dialing a name with
// no listener, or a closed one, is refused, as a dead server's port is.
type memNet struct {
	mu  sync.Mutex
	lis map[string]*pipeListener
}

func newMemNet() *memNet { return &memNet{lis: map[string]*pipeListener{}} }

// listen returns a new listener for name, in place of any earlier one.
func (n *memNet) listen(name string) net.Listener {
	l := newPipeListener()
	n.mu.Lock()
	n.lis[name] = l
	n.mu.Unlock()
	return l
}

// dial connects to the listener named addr (a grpc.WithContextDialer).
func (n *memNet) dial(ctx context.Context, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.lis[addr]
	n.mu.Unlock()
	if l != nil {
		c, err := l.dial(ctx, addr)
		if !errors.Is(err, net.ErrClosed) {
			return c, err
		}
	}
	return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr{}, Err: syscall.ECONNREFUSED}
}

// target is the gRPC target of the listener named name.
func (n *memNet) target(name string) string { return "passthrough:///" + name }

// serve serves srv on name until the test ends.
func (n *memNet) serve(t *testing.T, name string, srv *grpc.Server) {
	t.Helper()
	lis := n.listen(name)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

// client returns a client connection to name, closed when the test ends.
func (n *memNet) client(t *testing.T, name string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(n.target(name),
		grpc.WithContextDialer(n.dial),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(DefaultMaxMsgSize), grpc.MaxCallSendMsgSize(DefaultMaxMsgSize)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// upstream dials name as the proxy's upstream of that name.
func (n *memNet) upstream(t *testing.T, name string) *Upstream {
	t.Helper()
	up, err := DialUpstream(n.target(name), UpstreamOptions{Name: name, Conns: 1,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(n.dial)}})
	if err != nil {
		t.Fatal(err)
	}
	return up
}

// modelServer is a KServe v2 model server for routing tests: it answers
// every model, says which server answered (response id) and which model it
// was asked for (model_name), and misbehaves on demand. It listens on the
// test's memNet under its name.
type modelServer struct {
	kservepb.UnimplementedGRPCInferenceServiceServer
	name     string
	mn       *memNet
	srv      *grpc.Server
	behave   atomic.Int32
	code     atomic.Int32
	delay    atomic.Int64
	conf     atomic.Value // float32: the max of the probs output
	only     atomic.Value // string: misbehave only for this model name ("" all)
	calls    atomic.Int64
	mu       sync.Mutex
	asked    []string // model names asked, in order
	versions []string
	// traceparents are the W3C trace contexts the calls carried, in order.
	traceparents []string
}

func startModelServer(t *testing.T, mn *memNet, name string) *modelServer {
	t.Helper()
	m := &modelServer{name: name, mn: mn}
	m.conf.Store(float32(0.9))
	m.only.Store("")
	m.code.Store(int32(codes.Unavailable))
	m.start(t)
	return m
}

func (m *modelServer) start(t *testing.T) {
	m.srv = grpc.NewServer()
	kservepb.RegisterGRPCInferenceServiceServer(m.srv, m)
	m.mn.serve(t, m.name, m.srv)
}

// kill stops the server and its listener: connections are refused.
func (m *modelServer) kill() { m.srv.Stop() }

// restart serves again under the same name.
func (m *modelServer) restart(t *testing.T) {
	t.Helper()
	m.start(t)
}

func (m *modelServer) set(b int32) { m.behave.Store(b) }

func (m *modelServer) ModelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	m.calls.Add(1)
	m.mu.Lock()
	m.asked = append(m.asked, req.ModelName)
	m.versions = append(m.versions, req.ModelVersion)
	md, _ := metadata.FromIncomingContext(ctx)
	m.traceparents = append(m.traceparents, strings.Join(md.Get("traceparent"), ","))
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
// model server, all on one memNet. It must be made inside a synctest
// bubble (synctest.Test): its servers, connections and the router's loop
// belong to the bubble, and time is the bubble's fake clock.
type routeEnv struct {
	pri, edge *modelServer
	router    *route.Router
	proxy     *Proxy
	rec       *fakeRecorder
	client    kservepb.GRPCInferenceServiceClient
	priUp     *Upstream
	// openFor is the primary breaker's configured open time.
	openFor time.Duration
}

// newRouteEnv routes model "big" to the primary with "small" on the edge
// as fallback; change tweaks the route and options first.
func newRouteEnv(t *testing.T, change func(rc *route.RouteConfig, ro *route.RouterOptions, bc *BreakerConfig)) *routeEnv {
	t.Helper()
	return newRouteEnvWith(t, change)
}

// newRouteEnvWith is newRouteEnv with more options for the proxy.
func newRouteEnvWith(t *testing.T, change func(rc *route.RouteConfig, ro *route.RouterOptions, bc *BreakerConfig), opts ...Option) *routeEnv {
	t.Helper()
	mn := newMemNet()
	e := &routeEnv{pri: startModelServer(t, mn, "primary"), edge: startModelServer(t, mn, "edge"), rec: newFakeRecorder()}
	pri := mn.upstream(t, "primary")
	edge := mn.upstream(t, "edge")
	e.priUp = pri
	rc := route.RouteConfig{Model: "big", Upstream: pri, Fallback: &route.FallbackTarget{Upstream: edge, Model: "small"}, HedgeAfter: -1}
	bc := BreakerConfig{OpenFor: 100 * time.Millisecond, Probes: 2}
	ro := route.RouterOptions{Budget: BudgetConfig{Ratio: 1, MinPerSecond: 1000}, Breakers: map[route.Upstream]BreakerConfig{}}
	if change != nil {
		change(&rc, &ro, &bc)
	}
	ro.Routes = append(ro.Routes, rc)
	ro.Breakers[pri] = bc
	e.openFor = bc.WithDefaults().OpenFor
	r, err := route.NewRouter(ro)
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
	mn.serve(t, "proxy", srv)
	t.Cleanup(func() {
		srv.Stop()
		r.Close()
		p.Close()
		edge.Close()
	})
	e.client = kservepb.NewGRPCInferenceServiceClient(mn.client(t, "proxy"))
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
	if v := hdr.Get(grpcwire.HeaderRoute); len(v) > 0 {
		r.route = v[0]
	}
	if v := hdr.Get(grpcwire.HeaderRouteReason); len(v) > 0 {
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

// call is infer for a test that makes one call at a time: it returns once
// the call's work in the proxy (verdicts, counters, the router's
// accounting) is done too, so what the next call or route.Router.Status sees
// follows from the calls made, not from how fast they were made.
func (e *routeEnv) call(t *testing.T, timeout time.Duration) result {
	t.Helper()
	r := e.infer(t, timeout)
	synctest.Wait()
	return r
}

// breakerStatus returns, as route.Router.Status shows it, the breaker of the
// model routed to upstream (the primary's "big", the edge's "small"), or
// the upstream's own breaker where no model has one.
func (e *routeEnv) breakerStatus(t *testing.T, upstream string) route.BreakerStatus {
	t.Helper()
	_, bs := e.router.Status()
	var found *route.BreakerStatus
	for i, b := range bs {
		if b.Upstream == upstream && (found == nil || found.Model == "") {
			found = &bs[i]
		}
	}
	if found == nil {
		t.Fatalf("no breaker of %s in %+v", upstream, bs)
		return route.BreakerStatus{}
	}
	return *found
}

// transportStatus returns the upstream's own breaker (failures of the way
// to the server) as route.Router.Status shows it.
func (e *routeEnv) transportStatus(t *testing.T, upstream string) route.BreakerStatus {
	t.Helper()
	_, bs := e.router.Status()
	for _, b := range bs {
		if b.Upstream == upstream && b.Model == "" {
			return b
		}
	}
	t.Fatalf("no breaker of %s in %+v", upstream, bs)
	return route.BreakerStatus{}
}

// callUntil makes calls one at a time until done holds of one, and fails
// the test after n calls.
func (e *routeEnv) callUntil(t *testing.T, what string, n int, done func(result) bool) {
	t.Helper()
	for range n {
		if done(e.call(t, time.Second)) {
			return
		}
	}
	t.Fatalf("not after %d calls: %s", n, what)
}

// tripPrimary makes calls to the failing primary, one at a time, until
// its breaker opens.
func (e *routeEnv) tripPrimary(t *testing.T) {
	t.Helper()
	e.callUntil(t, "the primary's breaker to open", 50, func(result) bool {
		return e.breakerStatus(t, "primary").State == BreakerOpen.String()
	})
}

// outwaitOpenTime lets (fake) time pass beyond the longest open time of
// the primary's breaker (twice OpenFor): its next call is a half-open
// probe.
func (e *routeEnv) outwaitOpenTime() { time.Sleep(2*e.openFor + time.Millisecond) }

// waitReady waits until cc is connected, reconnecting as it must; the
// wait is the bubble's fake time (reconnection backoff included).
func waitReady(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		cc.Connect()
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("connection still %s after %s", s, testTimeout)
		}
	}
}

// modelBreaker returns model's breaker on up in the router's table.
func (e *routeEnv) modelBreaker(up *Upstream, model string) *route.Breaker {
	return e.router.Breaker(up, model)
}
