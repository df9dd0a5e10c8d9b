package proxy

import (
	"bytes"
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// testTimeout bounds every wait of these tests; reaching it is a failure,
// never an expected outcome.
const testTimeout = 10 * time.Second

// record is one call the fake recorder saw.
type record struct {
	key monitor.SeriesKey
	sm  monitor.Sample
}

// fakeRecorder keeps what the proxy records and hands it to the test in
// order through a channel, so a test waits for a record instead of
// guessing when the handler is done.
type fakeRecorder struct {
	records chan record
	mu      sync.Mutex
	gauges  map[string]*monitor.Gauge
}

func newFakeRecorder() *fakeRecorder {
	return &fakeRecorder{records: make(chan record, 1024), gauges: map[string]*monitor.Gauge{}}
}

func (r *fakeRecorder) Record(key monitor.SeriesKey, sm monitor.Sample) {
	r.records <- record{key, sm}
}

func (r *fakeRecorder) InFlight(upstream string) *monitor.Gauge {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gauges[upstream] == nil {
		r.gauges[upstream] = new(monitor.Gauge)
	}
	return r.gauges[upstream]
}

// next returns the next record, failing the test if none comes.
func (r *fakeRecorder) next(t *testing.T) record {
	t.Helper()
	select {
	case rec := <-r.records:
		return rec
	case <-time.After(testTimeout):
		t.Fatal("no record")
		return record{}
	}
}

// env is a backend with a proxy in front of it and a client for each.
type env struct {
	b              *backend
	rec            *fakeRecorder
	proxy          *Proxy
	srv            *grpc.Server
	direct, viaPxy *grpc.ClientConn
	upstream       string
}

func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	return newEnvWith(t, nil, opts...)
}

// newEnvWith is newEnv with a hook that registers services on the proxy's
// server before it starts.
func newEnvWith(t *testing.T, register func(*grpc.Server), opts ...Option) *env {
	t.Helper()
	b := startBackend(t)
	e := &env{b: b, rec: newFakeRecorder()}
	up, err := DialUpstream(b.addr, UpstreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.upstream = up.Name()
	p, err := New(StaticDirector(up), append([]Option{WithRecorder(e.rec)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	e.proxy = p
	e.srv = p.NewServer()
	if register != nil {
		register(e.srv)
	}
	addr := serveFront(t, p, e.srv)
	e.direct = dial(t, b.addr)
	e.viaPxy = dial(t, addr)
	return e
}

// grpcPathOnly makes the tests serve clients with the proxy's grpc.Server
// alone, as with fast_path off; by default they go through the relay
// (Proxy.Relay), as in production, which hands what it does not take to
// that server. `make test` runs the package both ways.
var grpcPathOnly = os.Getenv("INFERGATE_TEST_GRPC_PATH") != ""

// serveFront serves clients of p on a new listener, through the relay
// unless grpcPathOnly, and returns its address.
func serveFront(t testing.TB, p *Proxy, srv *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if grpcPathOnly {
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		return lis.Addr().String()
	}
	r := p.Relay(srv)
	go func() { _ = srv.Serve(r.LocalListener()) }()
	go func() { _ = r.Serve(lis) }()
	t.Cleanup(func() {
		r.Stop()
		srv.Stop()
	})
	return lis.Addr().String()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func simpleRequest(model string, raw int) *kservepb.ModelInferRequest {
	in := make([]byte, raw)
	for i := range in {
		in[i] = byte(i)
	}
	return &kservepb.ModelInferRequest{
		ModelName: model, ModelVersion: "1", Id: "req-42",
		Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, int64(raw / 4)}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, int64(raw / 4)}},
		},
		RawInputContents: [][]byte{in, in},
	}
}

func predictRequest(model string) *tfservingpb.PredictRequest {
	return &tfservingpb.PredictRequest{
		ModelSpec: &tfservingpb.ModelSpec{Name: model, SignatureName: "serving_default",
			VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(7)}},
		Inputs: map[string]*tensorflowpb.TensorProto{"x": {Dtype: tensorflowpb.DataType_DT_FLOAT, FloatVal: []float32{1, 2, 5},
			TensorShape: &tensorflowpb.TensorShapeProto{Dim: []*tensorflowpb.TensorShapeProto_Dim{{Size: 3}}}}},
	}
}

// rawInvoke calls method on cc with raw frames and returns the response
// bytes, headers, trailers and error.
func rawInvoke(ctx context.Context, cc *grpc.ClientConn, method string, req []byte) ([]byte, error) {
	resp := new(Frame)
	err := cc.Invoke(ctx, method, NewFrame(req), resp, grpc.ForceCodecV2(Codec()))
	b := bytes.Clone(resp.Bytes())
	resp.Free()
	return b, err
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// namedUpstream is an Upstream without connections, for tests that only
// route to it.
func namedUpstream(name string) *Upstream {
	u := &Upstream{}
	u.dest.Store(&upstreamDest{name: name})
	return u
}
