package proxy

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/tfservingpb"
)

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
	if rec.key.Model != "simple" || rec.key.Version != "1" || rec.key.Method != methods.ModelStreamInfer || rec.sm.Code != "OK" {
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

// TestUnaryAnswerShapePassesThrough checks that a unary answer keeps the
// shape the upstream gave it: a header frame then the message, a header
// frame then an error status, or a trailers-only error (no header frame,
// so the client's header is nil). The proxy skips setting a header that
// holds nothing gRPC would write when a message follows; this catches it
// skipping one that makes the difference.
func TestUnaryAnswerShapePassesThrough(t *testing.T) {
	backend := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			f := new(Frame)
			if err := ss.RecvMsg(f); err != nil {
				return err
			}
			defer f.Free()
			mode := metadata.ValueFromIncomingContext(ss.Context(), "x-shape")
			switch {
			case len(mode) == 0:
			case mode[0] == "header-then-error":
				if err := ss.SendHeader(nil); err != nil {
					return err
				}
				return status.Error(codes.FailedPrecondition, "after a header")
			case mode[0] == "trailers-only":
				return status.Error(codes.FailedPrecondition, "without a header")
			case mode[0] == "custom-header":
				if err := ss.SetHeader(metadata.Pairs("x-h", "1")); err != nil {
					return err
				}
			}
			return ss.SendMsg(f)
		}))
	addr := serve(t, backend)
	up, err := DialUpstream(addr, UpstreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(StaticDirector(up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	direct, via := dial(t, addr), dial(t, serve(t, p.NewServer()))
	req := mustMarshal(t, simpleRequest("simple", 16))

	type answer struct {
		header metadata.MD
		code   codes.Code
		msg    string
		resp   []byte
	}
	call := func(cc *grpc.ClientConn, shape string) answer {
		ctx := ctxT(t)
		if shape != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-shape", shape)
		}
		var a answer
		resp := new(Frame)
		err := cc.Invoke(ctx, "/inference.GRPCInferenceService/ModelInfer", NewFrame(req), resp,
			grpc.ForceCodecV2(Codec()), grpc.Header(&a.header))
		a.resp = bytes.Clone(resp.Bytes())
		resp.Free()
		s := status.Convert(err)
		a.code, a.msg = s.Code(), s.Message()
		return a
	}
	for _, shape := range []string{"", "custom-header", "header-then-error", "trailers-only"} {
		t.Run("shape="+shape, func(t *testing.T) {
			want, got := call(direct, shape), call(via, shape)
			if (want.header == nil) != (got.header == nil) || !reflect.DeepEqual(want.header, got.header) {
				t.Errorf("header through the proxy %v, direct %v", got.header, want.header)
			}
			if got.code != want.code || got.msg != want.msg || !bytes.Equal(got.resp, want.resp) {
				t.Errorf("through the proxy %v %q (%d bytes), direct %v %q (%d bytes)",
					got.code, got.msg, len(got.resp), want.code, want.msg, len(want.resp))
			}
		})
	}
}
