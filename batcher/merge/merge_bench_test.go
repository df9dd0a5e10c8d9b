package merge

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	kpb "github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

const benchBatch = 16

// resnet50Response answers a merged resnet50 request the way Triton does:
// output "probs" FP32 [N,10] in raw_output_contents.
func resnet50Response(b *testing.B, merged []byte) []byte {
	req := new(kpb.ModelInferRequest)
	if err := proto.Unmarshal(merged, req); err != nil {
		b.Fatal(err)
	}
	n := req.Inputs[0].Shape[0]
	return mustMarshal(b, &kpb.ModelInferResponse{
		ModelName: req.ModelName, ModelVersion: req.ModelVersion,
		Outputs:           []*kpb.ModelInferResponse_InferOutputTensor{{Name: "probs", Datatype: "FP32", Shape: []int64{n, 10}}},
		RawOutputContents: [][]byte{make([]byte, n*10*4)},
	})
}

// BenchmarkMergeSplitResnet50 measures the batching path for 16 callers of
// resnet50 (input FP32 [1,64] raw, output FP32 [1,10]): Parse each request,
// Merge into [16,64], Split the [16,10] response. The ns/request metric is
// the per-caller overhead the issue bounds at 5 µs.
func BenchmarkMergeSplitResnet50(b *testing.B) {
	reqs := make([][]byte, benchBatch)
	for i := range reqs {
		r := kReq(fmt.Sprintf("req-%d", i), true, i, kTensor{"input", "FP32", []int64{1, 64}})
		r.ModelName = "resnet50"
		r.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "probs"}}
		reqs[i] = mustMarshal(b, r)
	}
	items := make([]*Item, benchBatch)
	for i, r := range reqs {
		items[i], _ = KServe.Parse(r)
	}
	merged, err := KServe.Merge(items)
	if err != nil {
		b.Fatal(err)
	}
	resp := resnet50Response(b, merged)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i, r := range reqs {
			it, err := KServe.Parse(r)
			if err != nil {
				b.Fatal(err)
			}
			items[i] = it
		}
		if _, err := KServe.Merge(items); err != nil {
			b.Fatal(err)
		}
		if _, err := KServe.Split(resp, items); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBatch, "ns/request")
}

// BenchmarkMergeSplitResnet50TF is the same path for TF-Serving Predict
// with tensor_content.
func BenchmarkMergeSplitResnet50TF(b *testing.B) {
	f := tensorflowpb.DataType_DT_FLOAT
	reqs := make([][]byte, benchBatch)
	for i := range reqs {
		reqs[i] = mustMarshal(b, tReq(map[string]*tensorflowpb.TensorProto{"input": tTensor(f, []int64{1, 64}, i, true)}))
	}
	items := make([]*Item, benchBatch)
	resp := mustMarshal(b, &tfservingpb.PredictResponse{Outputs: map[string]*tensorflowpb.TensorProto{
		"probs": tTensor(f, []int64{benchBatch, 10}, 0, true),
	}})
	b.ReportAllocs()
	for b.Loop() {
		for i, r := range reqs {
			it, err := TF.Parse(r)
			if err != nil {
				b.Fatal(err)
			}
			items[i] = it
		}
		if _, err := TF.Merge(items); err != nil {
			b.Fatal(err)
		}
		if _, err := TF.Split(resp, items); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBatch, "ns/request")
}
