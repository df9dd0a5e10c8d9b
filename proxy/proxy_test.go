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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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
	addr := serve(t, e.srv)
	e.direct = dial(t, b.addr)
	e.viaPxy = dial(t, addr)
	return e
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

func TestUnaryResponsesAreByteIdentical(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		method string
		req    proto.Message
	}{
		{"ModelInfer with raw_input_contents", "/inference.GRPCInferenceService/ModelInfer", simpleRequest("simple", 64<<10)},
		{"Predict", "/tensorflow.serving.PredictionService/Predict", predictRequest("half_plus_two")},
		{"ModelMetadata", "/inference.GRPCInferenceService/ModelMetadata", &kservepb.ModelMetadataRequest{Name: "simple", Version: "1"}},
		{"GetModelMetadata", "/tensorflow.serving.PredictionService/GetModelMetadata",
			&tfservingpb.GetModelMetadataRequest{ModelSpec: &tfservingpb.ModelSpec{Name: "half_plus_two"}, MetadataField: []string{"signature_def"}}},
		{"health", "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := mustMarshal(t, tc.req)
			want, err := rawInvoke(ctxT(t), e.direct, tc.method, req)
			if err != nil {
				t.Fatalf("direct: %v", err)
			}
			got, err := rawInvoke(ctxT(t), e.viaPxy, tc.method, req)
			if err != nil {
				t.Fatalf("through the proxy: %v", err)
			}
			if len(want) == 0 && tc.name != "health" {
				t.Fatal("empty response")
			}
			if !bytes.Equal(got, want) {
				t.Errorf("response bytes differ: %d bytes through the proxy, %d direct", len(got), len(want))
			}
		})
	}
	// The backend decoded the proxied request to what the client sent.
	req := simpleRequest("simple", 1024)
	if _, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	if !proto.Equal(e.b.last, req) {
		t.Error("backend got a different request")
	}
}

func TestHealthPassesThrough(t *testing.T) {
	e := newEnv(t)
	resp, err := healthpb.NewHealthClient(e.viaPxy).Check(ctxT(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("status %v", resp.Status)
	}
}

func TestModelStreamInferFullDuplex(t *testing.T) {
	e := newEnv(t)
	stream, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelStreamInfer(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	// Each response is read before the next request is sent: this only
	// completes if the proxy forwards every frame at once, both ways.
	for i := range 5 {
		req := simpleRequest("simple", 64)
		req.Id = string(rune('a' + i))
		if i == 3 {
			req.Id = "bad" // an in-stream error travels as a message
		}
		if err := stream.Send(req); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("recv %d: %v", i, err)
		}
		if i == 3 {
			if resp.ErrorMessage == "" {
				t.Errorf("response %d: no error_message", i)
			}
		} else if resp.GetInferResponse().GetId() != req.Id {
			t.Errorf("response %d: id %q, want %q", i, resp.GetInferResponse().GetId(), req.Id)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
	rec := e.rec.next(t)
	if rec.key.Model != "simple" || rec.key.Version != "1" || rec.key.Method != streamInferFM || rec.sm.Code != "OK" {
		t.Errorf("record %+v", rec)
	}
}

func TestUnknownServiceStreams(t *testing.T) {
	e := newEnv(t)
	desc := func(server, client bool) *grpc.StreamDesc {
		return &grpc.StreamDesc{ServerStreams: server, ClientStreams: client}
	}
	t.Run("server streaming", func(t *testing.T) {
		cs, err := e.viaPxy.NewStream(ctxT(t), desc(true, false), "/test.Streams/ServerStream")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(wrapperspb.String("m")); err != nil {
			t.Fatal(err)
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			var m wrapperspb.StringValue
			err := cs.RecvMsg(&m)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.Value)
		}
		if strings.Join(got, ",") != "m0,m1,m2,m3,m4" {
			t.Errorf("got %v", got)
		}
	})
	t.Run("client streaming", func(t *testing.T) {
		cs, err := e.viaPxy.NewStream(ctxT(t), desc(false, true), "/test.Streams/ClientStream")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"a", "b", "c", "d"} {
			if err := cs.SendMsg(wrapperspb.String(s)); err != nil {
				t.Fatal(err)
			}
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		var m wrapperspb.StringValue
		if err := cs.RecvMsg(&m); err != nil {
			t.Fatal(err)
		}
		if m.Value != "abcd" {
			t.Errorf("got %q", m.Value)
		}
	})
	t.Run("bidi", func(t *testing.T) {
		cs, err := e.viaPxy.NewStream(ctxT(t), desc(true, true), "/test.Streams/Bidi")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"x", "y", "z"} {
			if err := cs.SendMsg(wrapperspb.String(s)); err != nil {
				t.Fatal(err)
			}
			var m wrapperspb.StringValue
			if err := cs.RecvMsg(&m); err != nil {
				t.Fatal(err)
			}
			if m.Value != s {
				t.Errorf("got %q, want %q", m.Value, s)
			}
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
			t.Errorf("end: %v", err)
		}
	})
	t.Run("unary on the stream path", func(t *testing.T) {
		var resp wrapperspb.StringValue
		if err := e.viaPxy.Invoke(ctxT(t), "/test.Streams/Unary", wrapperspb.String("hi"), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Value != "hi" {
			t.Errorf("got %q", resp.Value)
		}
	})
}

func TestMetadataBothWays(t *testing.T) {
	bin := string([]byte{0, 1, 0x80, 0xff})
	check := func(t *testing.T, e *env, header, trailer metadata.MD) {
		t.Helper()
		var md metadata.MD
		select {
		case md = <-e.b.md:
		case <-time.After(testTimeout):
			t.Fatal("backend saw no call")
		}
		if got := md["x-foo"]; len(got) != 2 || got[0] != "bar" || got[1] != "baz" {
			t.Errorf("backend x-foo = %q", got)
		}
		if got := md["x-foo-bin"]; len(got) != 1 || got[0] != bin {
			t.Errorf("backend x-foo-bin = %q", got)
		}
		if got := md["grpc-accept-encoding"]; len(got) > 1 {
			t.Errorf("backend grpc-accept-encoding = %q", got)
		}
		if got := md["content-type"]; len(got) != 1 || got[0] != "application/grpc" {
			t.Errorf("backend content-type = %q", got)
		}
		if got := header["x-echo"]; len(got) != 2 || got[0] != "bar" || got[1] != "baz" {
			t.Errorf("client header x-echo = %q", got)
		}
		if got := header["x-echo-bin"]; len(got) != 1 || got[0] != bin {
			t.Errorf("client header x-echo-bin = %q", got)
		}
		if got := trailer["x-trl"]; len(got) != 1 || got[0] != "done" {
			t.Errorf("client trailer x-trl = %q", got)
		}
		if got := trailer["x-trl-bin"]; len(got) != 1 || got[0] != string([]byte{0, 0xfe, 0xff}) {
			t.Errorf("client trailer x-trl-bin = %q", got)
		}
	}
	outCtx := func(t *testing.T) context.Context {
		return metadata.AppendToOutgoingContext(ctxT(t), "x-foo", "bar", "x-foo", "baz", "x-foo-bin", bin)
	}
	e := newEnv(t)
	t.Run("unary", func(t *testing.T) {
		var header, trailer metadata.MD
		_, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(outCtx(t), simpleRequest(modelEcho, 16),
			grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		check(t, e, header, trailer)
	})
	t.Run("stream", func(t *testing.T) {
		cs, err := e.viaPxy.NewStream(outCtx(t), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Streams/Bidi")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(wrapperspb.String(modelEcho)); err != nil {
			t.Fatal(err)
		}
		// Headers arrive before the stream ends.
		header, err := cs.Header()
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatal(err)
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
			t.Fatal(err)
		}
		check(t, e, header, cs.Trailer())
	})
	t.Run("content subtype", func(t *testing.T) {
		_, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(outCtx(t), simpleRequest(modelEcho, 16),
			grpc.CallContentSubtype("proto"))
		if err != nil {
			t.Fatal(err)
		}
		md := <-e.b.md
		if got := md["content-type"]; len(got) != 1 || got[0] != "application/grpc+proto" {
			t.Errorf("backend content-type = %q", got)
		}
	})
}

func TestErrorStatusPassesThroughUnchanged(t *testing.T) {
	e := newEnv(t)
	want := failStatus()
	checkStatus := func(t *testing.T, err error) {
		t.Helper()
		got, ok := status.FromError(err)
		if !ok {
			t.Fatalf("not a status: %v", err)
		}
		if !proto.Equal(got.Proto(), want.Proto()) {
			t.Errorf("status %v, want %v", got.Proto(), want.Proto())
		}
		if len(got.Details()) != 2 {
			t.Errorf("details %v", got.Details())
		}
	}
	t.Run("unary ModelInfer", func(t *testing.T) {
		_, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), simpleRequest(modelFail, 16))
		checkStatus(t, err)
	})
	t.Run("unary Predict", func(t *testing.T) {
		_, err := tfservingpb.NewPredictionServiceClient(e.viaPxy).Predict(ctxT(t), predictRequest(modelFail))
		checkStatus(t, err)
	})
	t.Run("stream after messages", func(t *testing.T) {
		cs, err := e.viaPxy.NewStream(ctxT(t), &grpc.StreamDesc{ServerStreams: true}, "/test.Streams/ServerStream")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(wrapperspb.String(modelFail)); err != nil {
			t.Fatal(err)
		}
		_ = cs.CloseSend()
		n := 0
		for {
			err = cs.RecvMsg(new(wrapperspb.StringValue))
			if err != nil {
				break
			}
			n++
		}
		if n != 5 {
			t.Errorf("%d messages before the status, want 5", n)
		}
		checkStatus(t, err)
	})
	t.Run("ModelStreamInfer", func(t *testing.T) {
		stream, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelStreamInfer(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(simpleRequest(modelFail, 16)); err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		checkStatus(t, err)
	})
	// A status from the upstream is the upstream's: the proxy classifies it.
	for range 4 {
		rec := e.rec.next(t)
		if rec.sm.Code != "FailedPrecondition" || rec.key.CodeClass != monitor.CodeClassClientError {
			t.Errorf("record %+v", rec)
		}
	}
}

func TestDeadlineAndCancelReachUpstream(t *testing.T) {
	e := newEnv(t)
	ctxWithin := func(t *testing.T) (context.Context, context.CancelFunc) {
		return context.WithTimeout(t.Context(), testTimeout)
	}
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"unary", func(ctx context.Context) error {
			_, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctx, simpleRequest(modelBlock, 16))
			return err
		}},
		{"stream", func(ctx context.Context) error {
			cs, err := e.viaPxy.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Streams/Bidi")
			if err != nil {
				return err
			}
			if err := cs.SendMsg(wrapperspb.String(modelBlock)); err != nil {
				return err
			}
			return cs.RecvMsg(new(wrapperspb.StringValue))
		}},
	}
	for _, c := range calls {
		t.Run(c.name+" cancel", func(t *testing.T) {
			ctx, cancel := ctxWithin(t)
			errc := make(chan error, 1)
			go func() { errc <- c.call(ctx) }()
			<-e.b.entered
			cancel()
			if err := <-errc; status.Code(err) != codes.Canceled {
				t.Errorf("client got %v, want Canceled", err)
			}
			rep := <-e.b.blocked
			if !rep.hadDeadline {
				t.Error("backend context had no deadline")
			}
			if rep.err == nil {
				t.Error("backend context not done")
			}
		})
		t.Run(c.name+" deadline", func(t *testing.T) {
			// The deadline is short so the test is quick; nothing asserts
			// how long anything took.
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			if err := c.call(ctx); status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("client got %v, want DeadlineExceeded", err)
			}
			<-e.b.entered
			rep := <-e.b.blocked
			if !rep.hadDeadline || rep.err == nil {
				t.Errorf("backend saw %+v", rep)
			}
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestUnreachableUpstreamIsUnavailable(t *testing.T) {
	rec := newFakeRecorder()
	up, err := DialUpstream(closedPort(t), UpstreamOptions{Name: "down"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(StaticDirector(up), WithRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cc := dial(t, serve(t, p.NewServer()))
	check := func(t *testing.T, err error) {
		t.Helper()
		// Unavailable, not DeadlineExceeded: the call failed fast instead
		// of waiting for the upstream until the deadline.
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v, want Unavailable", err)
		}
		if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, "infergate: upstream down: ") {
			t.Errorf("message %q", msg)
		}
	}
	t.Run("unary", func(t *testing.T) {
		_, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctxT(t), simpleRequest("simple", 16))
		check(t, err)
		r := rec.next(t)
		if r.key.Upstream != "down" || r.sm.Code != "Unavailable" || r.key.CodeClass != monitor.CodeClassServerError || r.key.Model != "simple" {
			t.Errorf("record %+v", r)
		}
	})
	t.Run("stream", func(t *testing.T) {
		stream, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelStreamInfer(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(simpleRequest("simple", 16))
		_, err = stream.Recv()
		check(t, err)
	})
	if v := rec.InFlight("down").Value(); v != 0 {
		t.Errorf("in flight %d after the calls", v)
	}
}

func TestOversizedMessageAndGarbage(t *testing.T) {
	e := newEnv(t, WithMaxMsgSize(64<<10))
	client := kservepb.NewGRPCInferenceServiceClient(e.viaPxy)
	_, err := client.ModelInfer(ctxT(t), simpleRequest("simple", 48<<10))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized request: %v, want ResourceExhausted", err)
	}
	// gRPC's server answers this itself, before the proxy sees the bytes.
	if !strings.Contains(status.Convert(err).Message(), "larger than max") {
		t.Errorf("message %q", status.Convert(err).Message())
	}
	if _, err := client.ModelInfer(ctxT(t), simpleRequest("simple", 1024)); err != nil {
		t.Fatalf("normal call after an oversized one: %v", err)
	}

	garbage := []byte{0xff, 0xff, 0xff, 0x0a}
	const method = "/inference.GRPCInferenceService/ModelInfer"
	_, wantErr := rawInvoke(ctxT(t), e.direct, method, garbage)
	_, gotErr := rawInvoke(ctxT(t), e.viaPxy, method, garbage)
	if status.Code(wantErr) != codes.Internal || !proto.Equal(status.Convert(gotErr).Proto(), status.Convert(wantErr).Proto()) {
		t.Errorf("garbage: proxy %v, direct %v", gotErr, wantErr)
	}
	if _, err := client.ModelInfer(ctxT(t), simpleRequest("simple", 1024)); err != nil {
		t.Fatalf("normal call after garbage: %v", err)
	}

	// The same on the stream path: the stream fails, the next one works.
	for _, raw := range []int{48 << 10, 1024} {
		stream, err := client.ModelStreamInfer(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(simpleRequest("simple", raw))
		_, err = stream.Recv()
		if raw > 1024 && status.Code(err) != codes.ResourceExhausted {
			t.Errorf("oversized stream message: %v, want ResourceExhausted", err)
		} else if raw == 1024 && err != nil {
			t.Errorf("stream after an oversized one: %v", err)
		}
		_ = stream.CloseSend()
	}

	// Records may come in another order than the calls.
	got := map[string]int{}
	for range 6 {
		r := e.rec.next(t)
		got[r.key.Method[strings.LastIndexByte(r.key.Method, '/')+1:]+" "+r.key.Model+" "+r.sm.Code]++
	}
	want := map[string]int{
		"ModelInfer  ResourceExhausted": 1, "ModelInfer simple OK": 2, "ModelInfer  Internal": 1,
		"ModelStreamInfer  ResourceExhausted": 1, "ModelStreamInfer simple OK": 1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d records %q, want %d; all: %v", got[k], k, n, got)
		}
	}
}

func TestMeasurement(t *testing.T) {
	e := newEnv(t)
	ks := kservepb.NewGRPCInferenceServiceClient(e.viaPxy)
	tf := tfservingpb.NewPredictionServiceClient(e.viaPxy)
	req := simpleRequest("simple", 4096)
	resp, err := ks.ModelInfer(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Predict(ctxT(t), predictRequest("half_plus_two")); err != nil {
		t.Fatal(err)
	}
	// Half a MiB arrives in many buffers: the model name is read across them.
	if _, err := ks.ModelInfer(ctxT(t), simpleRequest("big", 256<<10)); err != nil {
		t.Fatal(err)
	}
	label := predictRequest("half_plus_two")
	label.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "stable"}
	if _, err := tf.Predict(ctxT(t), label); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.ModelReady(ctxT(t), &kservepb.ModelReadyRequest{Name: "simple", Version: "3"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ModelReady: %v", err)
	}
	if _, err := healthpb.NewHealthClient(e.viaPxy).Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	wants := []monitor.SeriesKey{
		{Model: "simple", Version: "1", Method: "/inference.GRPCInferenceService/ModelInfer", CodeClass: "ok"},
		{Model: "half_plus_two", Version: "7", Method: "/tensorflow.serving.PredictionService/Predict", CodeClass: "ok"},
		{Model: "big", Version: "1", Method: "/inference.GRPCInferenceService/ModelInfer", CodeClass: "ok"},
		{Model: "half_plus_two", Version: "stable", Method: "/tensorflow.serving.PredictionService/Predict", CodeClass: "ok"},
		{Model: "simple", Version: "3", Method: "/inference.GRPCInferenceService/ModelReady", CodeClass: "server_error"},
		{Method: "/grpc.health.v1.Health/Check", CodeClass: "ok"},
	}
	// A handler records after its response is sent, so records may come
	// in another order than the calls.
	got := map[monitor.SeriesKey]monitor.Sample{}
	for range wants {
		r := e.rec.next(t)
		got[r.key] = r.sm
	}
	for i, w := range wants {
		w.Upstream = e.upstream
		sm, ok := got[w]
		if !ok {
			t.Errorf("no record %+v; got %v", w, got)
			continue
		}
		if sm.Total < sm.Upstream || sm.Upstream < 0 {
			t.Errorf("record %d: total %v < upstream %v", i, sm.Total, sm.Upstream)
		}
		if i == 0 {
			if sm.Code != "OK" || sm.BytesIn != int64(proto.Size(req)) || sm.BytesOut != int64(proto.Size(resp)) {
				t.Errorf("record 0 sample %+v, want bytes %d/%d", sm, proto.Size(req), proto.Size(resp))
			}
		}
	}
	if v := e.rec.InFlight(e.upstream).Value(); v != 0 {
		t.Errorf("in flight %d after the calls", v)
	}
}

func TestClockTimesTheCall(t *testing.T) {
	// A clock that advances one second per reading: total spans four
	// readings (start, before and after Invoke, end), upstream one.
	var mu sync.Mutex
	var tick time.Time
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tick = tick.Add(time.Second)
		return tick
	}
	e := newEnv(t, WithClock(clock))
	if _, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), simpleRequest("simple", 16)); err != nil {
		t.Fatal(err)
	}
	r := e.rec.next(t)
	if r.sm.Upstream != time.Second || r.sm.Total != 3*time.Second {
		t.Errorf("upstream %v total %v, want 1s and 3s", r.sm.Upstream, r.sm.Total)
	}
}

// signalListener reports when the server closes it, which GracefulStop does
// first.
type signalListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *signalListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

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

func TestContentSubtype(t *testing.T) {
	cases := map[string]string{
		"application/grpc":        "",
		"application/grpc+proto":  "proto",
		"application/grpc;JSON":   "json",
		"application/grpc+":       "",
		"application/grpcx":       "",
		"text/plain":              "",
		"APPLICATION/GRPC+PROTO":  "proto",
		"application/grpc-web+pb": "",
	}
	for in, want := range cases {
		if got := contentSubtype(in); got != want {
			t.Errorf("contentSubtype(%q) = %q, want %q", in, got, want)
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
