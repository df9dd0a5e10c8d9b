package sim

// DefaultModels returns the models a Server loads when Config.Models is nil:
// simple and identity_fp32 as in Triton's examples, half_plus_two as in
// TF-Serving's, two GPU-like classifiers (resnet50: one slot, a long
// tail; mobilenet_v3: light, four slots) served on both protocols, and
// llm_stream, a decoupled model that streams 16 responses per request
// (20 ms to the first, then one every 5 ms).
func DefaultModels() []ModelConfig {
	both := []string{ProtocolKServe, ProtocolTFServing}
	classifier := func(name string, base, perItem float64, slots int, tail float64) ModelConfig {
		return ModelConfig{
			Name:      name,
			Kind:      KindClassifier,
			Platform:  "tensorrt_plan",
			Protocols: both,
			MaxBatch:  64,
			Slots:     slots,
			Inputs:    []TensorSpec{{Name: "input", Datatype: "FP32", Dims: []int64{64}}},
			Outputs:   []TensorSpec{{Name: "probs", Datatype: "FP32", Dims: []int64{10}}},
			Latency: LatencyProfile{BaseMS: base, PerItemMS: perItem,
				TailProbability: tail, TailMinFactor: 4, TailMaxFactor: 8},
		}
	}
	resnet := classifier("resnet50", 5, 0.25, 1, 0.01)
	mobile := classifier("mobilenet_v3", 1, 0.05, 4, 0)
	mobile.Latency.TailMinFactor, mobile.Latency.TailMaxFactor = 0, 0
	return []ModelConfig{
		{
			Name:      "simple",
			Kind:      KindAddSub,
			Platform:  "tensorflow_graphdef",
			Protocols: []string{ProtocolKServe},
			MaxBatch:  8,
			Inputs: []TensorSpec{
				{Name: "INPUT0", Datatype: "INT32", Dims: []int64{16}},
				{Name: "INPUT1", Datatype: "INT32", Dims: []int64{16}},
			},
			Outputs: []TensorSpec{
				{Name: "OUTPUT0", Datatype: "INT32", Dims: []int64{16}},
				{Name: "OUTPUT1", Datatype: "INT32", Dims: []int64{16}},
			},
		},
		{
			Name:      "half_plus_two",
			Kind:      KindHalfPlusTwo,
			Platform:  "tensorflow_savedmodel",
			Protocols: []string{ProtocolTFServing},
			Inputs:    []TensorSpec{{Name: "x", Datatype: "FP32", AnyShape: true}},
			Outputs:   []TensorSpec{{Name: "y", Datatype: "FP32", AnyShape: true}},
		},
		resnet,
		mobile,
		{
			Name:      "identity_fp32",
			Kind:      KindIdentity,
			Platform:  "python",
			Protocols: both,
			Inputs:    []TensorSpec{{Name: "INPUT0", Datatype: "FP32", AnyShape: true}},
			Outputs:   []TensorSpec{{Name: "OUTPUT0", Datatype: "FP32", AnyShape: true}},
		},
		{
			Name:      "llm_stream",
			Kind:      KindTokenStream,
			Platform:  "tensorrtllm",
			Protocols: []string{ProtocolKServe},
			Inputs:    []TensorSpec{{Name: "max_tokens", Datatype: "INT32", Dims: []int64{1}}},
			Outputs:   []TensorSpec{{Name: "token", Datatype: "INT32", Dims: []int64{1}}},
			Latency:   LatencyProfile{BaseMS: 20},
			Stream:    StreamProfile{Responses: 16, TokenMS: 5},
		},
	}
}
