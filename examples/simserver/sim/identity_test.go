package sim

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func TestIdentityKServe(t *testing.T) {
	h := start(t, Config{})
	v := seq(2*3*4, -3, 0.25)
	shape := []int64{2, 3, 4}
	for _, raw := range []bool{true, false} {
		req := &kservepb.ModelInferRequest{
			ModelName: "identity_fp32",
			Inputs:    []*kservepb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: shape}},
		}
		if raw {
			req.RawInputContents = [][]byte{rawFloats(v)}
		} else {
			req.Inputs[0].Contents = &kservepb.InferTensorContents{Fp32Contents: v}
		}
		resp, err := h.ks.ModelInfer(context.Background(), req)
		if err != nil {
			t.Fatalf("raw=%v: %v", raw, err)
		}
		out := resp.Outputs[0]
		if out.Name != "OUTPUT0" || out.Datatype != "FP32" || !slices.Equal(out.Shape, shape) {
			t.Errorf("raw=%v: output = %v", raw, out)
		}
		if !bytes.Equal(resp.RawOutputContents[0], rawFloats(v)) {
			t.Errorf("raw=%v: bytes differ", raw)
		}
	}
}

func TestIdentityTFServing(t *testing.T) {
	h := start(t, Config{})
	v := seq(5, 1, 1)
	for _, content := range []bool{true, false} {
		resp, err := h.tf.Predict(context.Background(), &tfservingpb.PredictRequest{
			ModelSpec: tfSpec("identity_fp32"),
			Inputs:    map[string]*tensorflowpb.TensorProto{"INPUT0": floatTensor([]int64{1, 5}, v, content)},
		})
		if err != nil {
			t.Fatalf("content=%v: %v", content, err)
		}
		out := resp.Outputs["OUTPUT0"]
		if !bytes.Equal(out.GetTensorContent(), rawFloats(v)) || len(out.GetTensorShape().GetDim()) != 2 {
			t.Errorf("content=%v: output = %v", content, out)
		}
	}
}
