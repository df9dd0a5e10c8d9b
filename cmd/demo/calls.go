package main

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// featureDim is the per-item width of the demo classifiers' "input"
// tensor (resnet50 and mobilenet_v3 in simserver's default models).
const featureDim = 64

// maxBatch is the largest N the load sends in one [N,64] request.
const maxBatch = 8

// demoStreams returns the demo's request mix, each rate multiplied by
// scale. The mix reaches every protocol path: KServe raw tensors, TF
// tensor_content and TF float_val.
func demoStreams(kc kservepb.GRPCInferenceServiceClient, tc tfservingpb.PredictionServiceClient, scale float64) []stream {
	return []stream{
		{name: "kserve resnet50", rate: 60 * scale, newCall: kserveClassifier(kc, "resnet50")},
		{name: "tf resnet50", rate: 20 * scale, newCall: tfClassifier(tc, "resnet50")},
		{name: "kserve mobilenet_v3", rate: 80 * scale, newCall: kserveClassifier(kc, "mobilenet_v3")},
		{name: "kserve simple", rate: 50 * scale, newCall: kserveSimple(kc)},
		{name: "tf half_plus_two", rate: 30 * scale, newCall: tfHalfPlusTwo(tc)},
	}
}

// kserveClassifier sends ModelInfer with input "input" FP32 [N,64], N in
// 1..maxBatch, as raw little-endian contents.
func kserveClassifier(kc kservepb.GRPCInferenceServiceClient, model string) func(*rand.Rand) func(context.Context) error {
	return func(rng *rand.Rand) func(context.Context) error {
		n := 1 + rng.IntN(maxBatch)
		req := &kservepb.ModelInferRequest{
			ModelName: model,
			Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
				{Name: "input", Datatype: "FP32", Shape: []int64{int64(n), featureDim}},
			},
			RawInputContents: [][]byte{randomFloats(rng, n*featureDim)},
		}
		return func(ctx context.Context) error {
			_, err := kc.ModelInfer(ctx, req)
			return err
		}
	}
}

// tfClassifier sends Predict with input "input" DT_FLOAT [N,64] in
// tensor_content.
func tfClassifier(tc tfservingpb.PredictionServiceClient, model string) func(*rand.Rand) func(context.Context) error {
	return func(rng *rand.Rand) func(context.Context) error {
		n := 1 + rng.IntN(maxBatch)
		req := &tfservingpb.PredictRequest{
			ModelSpec: &tfservingpb.ModelSpec{Name: model},
			Inputs: map[string]*tensorflowpb.TensorProto{
				"input": {
					Dtype:         tensorflowpb.DataType_DT_FLOAT,
					TensorShape:   shape(int64(n), featureDim),
					TensorContent: randomFloats(rng, n*featureDim),
				},
			},
		}
		return func(ctx context.Context) error {
			_, err := tc.Predict(ctx, req)
			return err
		}
	}
}

// kserveSimple sends the classic "simple" model its two INT32 [1,16]
// inputs.
func kserveSimple(kc kservepb.GRPCInferenceServiceClient) func(*rand.Rand) func(context.Context) error {
	return func(rng *rand.Rand) func(context.Context) error {
		in0, in1 := make([]byte, 16*4), make([]byte, 16*4)
		for i := range 16 {
			binary.LittleEndian.PutUint32(in0[i*4:], uint32(rng.Int32N(1000)))
			binary.LittleEndian.PutUint32(in1[i*4:], uint32(rng.Int32N(1000)))
		}
		req := &kservepb.ModelInferRequest{
			ModelName: "simple",
			Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
				{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
				{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
			},
			RawInputContents: [][]byte{in0, in1},
		}
		return func(ctx context.Context) error {
			_, err := kc.ModelInfer(ctx, req)
			return err
		}
	}
}

// tfHalfPlusTwo sends half_plus_two its input "x", DT_FLOAT [3], in
// float_val.
func tfHalfPlusTwo(tc tfservingpb.PredictionServiceClient) func(*rand.Rand) func(context.Context) error {
	return func(rng *rand.Rand) func(context.Context) error {
		req := &tfservingpb.PredictRequest{
			ModelSpec: &tfservingpb.ModelSpec{Name: "half_plus_two"},
			Inputs: map[string]*tensorflowpb.TensorProto{
				"x": {
					Dtype:       tensorflowpb.DataType_DT_FLOAT,
					TensorShape: shape(3),
					FloatVal:    []float32{rng.Float32() * 10, rng.Float32() * 10, rng.Float32() * 10},
				},
			},
		}
		return func(ctx context.Context) error {
			_, err := tc.Predict(ctx, req)
			return err
		}
	}
}

func shape(dims ...int64) *tensorflowpb.TensorShapeProto {
	s := &tensorflowpb.TensorShapeProto{Dim: make([]*tensorflowpb.TensorShapeProto_Dim, len(dims))}
	for i, d := range dims {
		s.Dim[i] = &tensorflowpb.TensorShapeProto_Dim{Size: d}
	}
	return s
}

// randomFloats returns n float32 values in [0,1), little-endian, row-major.
func randomFloats(rng *rand.Rand, n int) []byte {
	b := make([]byte, n*4)
	for i := range n {
		binary.LittleEndian.PutUint32(b[i*4:], math.Float32bits(rng.Float32()))
	}
	return b
}
