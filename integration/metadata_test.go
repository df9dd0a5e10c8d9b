package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// TestMetadataBothWays: request metadata (text and binary) reaches
// simserver, which echoes x-echo-* keys back as headers and trailers; the
// client sees the same through infergate as directly, for unary calls of
// both protocols and for the bidi stream.
func TestMetadataBothWays(t *testing.T) {
	e := newEnv(t)
	bin := []byte{0x00, 0xff, 0x10, 0x80}
	send := metadata.Pairs("x-echo-tenant", "team-a", "x-echo-blob-bin", string(bin))
	check := func(t *testing.T, where string, h, tr metadata.MD) {
		t.Helper()
		if got := h.Get("x-echo-tenant"); len(got) != 1 || got[0] != "team-a" {
			t.Errorf("%s: header x-echo-tenant = %q", where, got)
		}
		if got := h.Get("x-echo-blob-bin"); len(got) != 1 || !bytes.Equal([]byte(got[0]), bin) {
			t.Errorf("%s: binary header = %q", where, got)
		}
		if got := tr.Get("x-echo-tenant-trailer"); len(got) != 1 || got[0] != "team-a" {
			t.Errorf("%s: trailer x-echo-tenant-trailer = %q", where, got)
		}
		if got := tr.Get("x-echo-blob-trailer-bin"); len(got) != 1 || !bytes.Equal([]byte(got[0]), bin) {
			t.Errorf("%s: binary trailer = %q", where, got)
		}
	}
	for _, path := range []struct{ name, addr string }{{"direct", e.sim.grpc}, {"infergate", e.gate.grpc}} {
		t.Run(path.name, func(t *testing.T) {
			cc := dial(t, path.addr)
			ctx := metadata.NewOutgoingContext(testCtx(t), send)
			var h, tr metadata.MD
			if _, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctx, simpleRequest("m"), grpc.Header(&h), grpc.Trailer(&tr)); err != nil {
				t.Fatal(err)
			}
			check(t, "kserve unary", h, tr)
			h, tr = nil, nil
			if _, err := tfservingpb.NewPredictionServiceClient(cc).Predict(ctx, halfPlusTwoRequest(1), grpc.Header(&h), grpc.Trailer(&tr)); err != nil {
				t.Fatal(err)
			}
			check(t, "tf unary", h, tr)

			stream, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelStreamInfer(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(simpleRequest("s")); err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatal(err)
			}
			sh, err := stream.Header()
			if err != nil {
				t.Fatal(err)
			}
			stream.CloseSend()
			for {
				if _, err := stream.Recv(); err != nil {
					break
				}
			}
			check(t, "bidi stream", sh, stream.Trailer())
		})
	}
}

// TestErrorDetailsPassThrough: an injected fault's status (code, message
// and a google.rpc.ErrorInfo detail) arrives through infergate exactly as
// directly, on both protocols.
func TestErrorDetailsPassThrough(t *testing.T) {
	e := newEnv(t)
	for _, model := range []string{"simple", "half_plus_two"} {
		body := fmt.Sprintf(`{"model":%q,"error_rate":1,"error_code":"RESOURCE_EXHAUSTED"}`, model)
		if code, resp := httpDo(t, http.MethodPost, "http://"+e.sim.admin+"/api/v1/faults", body); code != http.StatusOK {
			t.Fatalf("fault: %d %s", code, resp)
		}
	}
	call := func(addr string) (*status.Status, *status.Status) {
		cc := dial(t, addr)
		ctx := testCtx(t)
		_, kerr := kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctx, simpleRequest("e"))
		_, terr := tfservingpb.NewPredictionServiceClient(cc).Predict(ctx, halfPlusTwoRequest(1))
		return status.Convert(kerr), status.Convert(terr)
	}
	dk, dt := call(e.sim.grpc)
	pk, pt := call(e.gate.grpc)
	for _, c := range []struct {
		name            string
		direct, viaGate *status.Status
	}{{"kserve", dk, pk}, {"tf", dt, pt}} {
		if c.direct.Code() != codes.ResourceExhausted || len(c.direct.Details()) != 1 {
			t.Fatalf("%s direct: %v %v", c.name, c.direct, c.direct.Details())
		}
		if !proto.Equal(c.direct.Proto(), c.viaGate.Proto()) {
			t.Errorf("%s: status differs\ndirect:    %v\ninfergate: %v", c.name, c.direct.Proto(), c.viaGate.Proto())
		}
		info, ok := c.viaGate.Details()[0].(*errdetails.ErrorInfo)
		if !ok || info.Reason != "INJECTED_FAULT" {
			t.Errorf("%s: detail %v", c.name, c.viaGate.Details())
		}
	}
}
