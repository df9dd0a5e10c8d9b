package integration

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// env is one simserver with one infergate in front of it.
type env struct {
	sim, gate *proc
}

func newEnv(t *testing.T, gateArgs ...string) env {
	t.Helper()
	sim := startSim(t)
	return env{sim: sim, gate: startProxy(t, sim.grpc, gateArgs...)}
}

// TestIdenticalBytes sends the same request bytes straight to simserver and
// through infergate, for both protocols, and wants the same response bytes.
func TestIdenticalBytes(t *testing.T) {
	e := newEnv(t)
	direct, via := dial(t, e.sim.grpc), dial(t, e.gate.grpc)
	cases := []struct {
		name, method string
		req          proto.Message
	}{
		{"kserve simple raw", "/inference.GRPCInferenceService/ModelInfer", simpleRequest("req-1")},
		{"kserve resnet50", "/inference.GRPCInferenceService/ModelInfer", resnetRequest("resnet50", 4)},
		{"kserve identity 1MiB", "/inference.GRPCInferenceService/ModelInfer", identityRequest(1 << 18)},
		{"kserve metadata", "/inference.GRPCInferenceService/ModelMetadata", &kservepb.ModelMetadataRequest{Name: "resnet50"}},
		{"kserve server metadata", "/inference.GRPCInferenceService/ServerMetadata", &kservepb.ServerMetadataRequest{}},
		{"tf half_plus_two", "/tensorflow.serving.PredictionService/Predict", halfPlusTwoRequest(1, 2, 5)},
		{"tf metadata", "/tensorflow.serving.PredictionService/GetModelMetadata", &tfservingpb.GetModelMetadataRequest{
			ModelSpec: &tfservingpb.ModelSpec{Name: "half_plus_two"}, MetadataField: []string{"signature_def"}}},
		{"grpc health", "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			req := mustMarshal(t, tc.req)
			want, err := invokeRaw(ctx, direct, tc.method, req)
			if err != nil {
				t.Fatalf("direct: %v", err)
			}
			got, err := invokeRaw(ctx, via, tc.method, req)
			if err != nil {
				t.Fatalf("via infergate: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("response bytes differ: direct %d bytes, via infergate %d bytes", len(want), len(got))
			}
		})
	}
}

// TestErrorStatusPassesThrough: a model server's error reaches the client
// with the same code and message as directly.
func TestErrorStatusPassesThrough(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	req := mustMarshal(t, &kservepb.ModelInferRequest{ModelName: "no_such_model"})
	_, derr := invokeRaw(ctx, dial(t, e.sim.grpc), "/inference.GRPCInferenceService/ModelInfer", req)
	_, perr := invokeRaw(ctx, dial(t, e.gate.grpc), "/inference.GRPCInferenceService/ModelInfer", req)
	ds, ps := status.Convert(derr), status.Convert(perr)
	if ds.Code() == codes.OK || ds.Code() != ps.Code() || ds.Message() != ps.Message() {
		t.Fatalf("direct %v, via infergate %v", ds, ps)
	}
}

// TestBidiStreamInfer runs ModelStreamInfer through the proxy: several
// requests, one of them bad; every one is answered in order and a bad one
// comes back in error_message while the stream stays open (Triton's way).
func TestBidiStreamInfer(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	stream, err := kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc)).ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		req := simpleRequest(fmt.Sprintf("s%d", i))
		if i == 3 {
			req.ModelName = "no_such_model"
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("recv %d: %v", i, err)
		}
		if i == 3 {
			if resp.ErrorMessage == "" {
				t.Fatalf("request %d for an unknown model: want error_message", i)
			}
			continue
		}
		if resp.ErrorMessage != "" || resp.InferResponse.GetId() != req.Id {
			t.Fatalf("response %d: %v", i, resp)
		}
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
}

// TestServerStreaming uses grpc.health.v1.Health/Watch, a server-streaming
// method simserver serves, through the proxy.
func TestServerStreaming(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	w, err := healthpb.NewHealthClient(dial(t, e.gate.grpc)).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := w.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("status %v", resp.Status)
	}
}
