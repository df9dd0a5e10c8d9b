package sim

import (
	"context"
	"math"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func classifierKServe(model string, n int, v []float32) *kservepb.ModelInferRequest {
	return &kservepb.ModelInferRequest{
		ModelName:        model,
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "input", Datatype: "FP32", Shape: []int64{int64(n), 64}}},
		RawInputContents: [][]byte{rawFloats(v)},
	}
}

func classifierTF(model string, n int, v []float32) *tfservingpb.PredictRequest {
	return &tfservingpb.PredictRequest{
		ModelSpec: tfSpec(model),
		Inputs:    map[string]*tensorflowpb.TensorProto{"input": floatTensor([]int64{int64(n), 64}, v, false)},
	}
}

func TestClassifierSameOnBothProtocols(t *testing.T) {
	h := start(t, Config{})
	const n = 3
	in := seq(n*64, -1, 0.01)
	for _, model := range []string{"resnet50", "mobilenet_v3"} {
		kr, err := h.ks.ModelInfer(context.Background(), classifierKServe(model, n, in))
		if err != nil {
			t.Fatalf("%s kserve: %v", model, err)
		}
		tr, err := h.tf.Predict(context.Background(), classifierTF(model, n, in))
		if err != nil {
			t.Fatalf("%s tfserving: %v", model, err)
		}
		kprobs := decodeFloats(kr.RawOutputContents[0])
		tprobs := tr.Outputs["probs"].FloatVal
		if !slices.Equal(kprobs, tprobs) {
			t.Fatalf("%s: kserve %v != tfserving %v", model, kprobs, tprobs)
		}
		if len(kprobs) != n*10 || !slices.Equal(kr.Outputs[0].Shape, []int64{n, 10}) {
			t.Fatalf("%s: %d probs, shape %v", model, len(kprobs), kr.Outputs[0].Shape)
		}
		for r := 0; r < n; r++ {
			var sum float64
			for _, p := range kprobs[r*10 : (r+1)*10] {
				sum += float64(p)
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Errorf("%s row %d sums to %v", model, r, sum)
			}
		}
	}
}

func TestClassifierDeterministicAcrossServers(t *testing.T) {
	in := seq(64, 0.5, -0.02)
	var outs [][]byte
	for _, seed := range []uint64{1, 99} {
		h := start(t, Config{Seed: seed})
		resp, err := h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 1, in))
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, resp.RawOutputContents[0])
	}
	if !slices.Equal(outs[0], outs[1]) {
		t.Error("resnet50 output depends on the server seed")
	}
}

func TestClassifierBatchLimit(t *testing.T) {
	h := start(t, Config{})
	in := seq(65*64, 0, 0.001)
	_, err := h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 65, in))
	wantCode(t, err, codes.InvalidArgument, "batch-size must be <= 64 for 'resnet50'")
	_, err = h.tf.Predict(context.Background(), classifierTF("resnet50", 65, in))
	wantCode(t, err, codes.InvalidArgument, "batch-size must be <= 64 for 'resnet50'")
	if _, err := h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 64, in[:64*64])); err != nil {
		t.Errorf("batch 64: %v", err)
	}
}
