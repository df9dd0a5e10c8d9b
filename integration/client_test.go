package integration

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// rawCodec sends and receives *[]byte untouched, so a test can compare the
// exact bytes that arrive directly and through the proxy.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

var _ encoding.CodecV2 = rawCodec{}

const maxMsg = 256 << 20

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
	}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// invokeRaw calls method with request bytes and returns the response bytes.
func invokeRaw(ctx context.Context, cc *grpc.ClientConn, method string, req []byte, opts ...grpc.CallOption) ([]byte, error) {
	var resp []byte
	opts = append(opts, grpc.ForceCodecV2(rawCodec{}))
	err := cc.Invoke(ctx, method, &req, &resp, opts...)
	return resp, err
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func int32Raw(vals []int32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

func fp32Raw(vals []float32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func seq(n int, f func(i int) float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// simpleRequest is Triton's "simple" example request with raw inputs.
func simpleRequest(id string) *kservepb.ModelInferRequest {
	a := make([]int32, 16)
	b := make([]int32, 16)
	for i := range a {
		a[i], b[i] = int32(i), int32(2*i+1)
	}
	return &kservepb.ModelInferRequest{
		ModelName: "simple",
		Id:        id,
		Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
		},
		RawInputContents: [][]byte{int32Raw(a), int32Raw(b)},
	}
}

func resnetRequest(model string, n int) *kservepb.ModelInferRequest {
	return &kservepb.ModelInferRequest{
		ModelName:        model,
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "input", Datatype: "FP32", Shape: []int64{int64(n), 64}}},
		RawInputContents: [][]byte{fp32Raw(seq(n*64, func(i int) float32 { return float32(i%7) / 7 }))},
	}
}

func identityRequest(floats int) *kservepb.ModelInferRequest {
	return &kservepb.ModelInferRequest{
		ModelName:        "identity_fp32",
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, int64(floats)}}},
		RawInputContents: [][]byte{fp32Raw(seq(floats, func(i int) float32 { return float32(i) }))},
	}
}

func halfPlusTwoRequest(xs ...float32) *tfservingpb.PredictRequest {
	return &tfservingpb.PredictRequest{
		ModelSpec: &tfservingpb.ModelSpec{Name: "half_plus_two", SignatureName: "serving_default"},
		Inputs: map[string]*tensorflowpb.TensorProto{"x": {
			Dtype:       tensorflowpb.DataType_DT_FLOAT,
			TensorShape: &tensorflowpb.TensorShapeProto{Dim: []*tensorflowpb.TensorShapeProto_Dim{{Size: int64(len(xs))}}},
			FloatVal:    xs,
		}},
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
