package wire

import (
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// BenchmarkModelInferTarget scans a 1 MiB request: the cost must not grow
// with the tensor bytes, which are skipped by length.
func BenchmarkModelInferTarget(b *testing.B) {
	in := marshal(b, inferRequest("simple", "1", 1<<20))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ModelInferTarget(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPredictTarget(b *testing.B) {
	req := predictRequest(&tfservingpb.ModelSpec{Name: "half_plus_two",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(1)}})
	req.Inputs["x"] = &tensorflowpb.TensorProto{Dtype: tensorflowpb.DataType_DT_FLOAT, TensorContent: make([]byte, 1<<20)}
	in := marshal(b, req)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := PredictTarget(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRewriteModelInferName(b *testing.B) {
	in := marshal(b, inferRequest("simple", "1", 1<<20))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RewriteModelInferName(in, "simple_fallback"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkModelInferTargetChunks scans a 1 MiB request held in 16 KiB
// chunks, as gRPC delivers it.
func BenchmarkModelInferTargetChunks(b *testing.B) {
	in := marshal(b, inferRequest("simple", "1", 1<<20))
	var chunks [][]byte
	for p := in; len(p) > 0; {
		n := min(16<<10, len(p))
		chunks, p = append(chunks, p[:n]), p[n:]
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ModelInferTargetChunks(chunks); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkModelInferConfidence reads a 1000-class FP32 output in raw
// contents, as Triton answers, beside a second output it must skip: the
// cost is one pass over the 4 KB of values.
func BenchmarkModelInferConfidence(b *testing.B) {
	probs := make([]float32, 1000)
	for i := range probs {
		probs[i] = float32(i%97) / 1000
	}
	in := marshal(b, inferResp([][]byte{rawF32(0, 1), rawF32(probs...)},
		inferOut("logits_argmax", "FP32", []int64{1, 2}, nil), inferOut("probs", "FP32", []int64{1, 1000}, nil)))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ModelInferConfidence(in, "probs"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkModelInferConfidenceBatch is a batch of 32 rows of 1000 classes.
func BenchmarkModelInferConfidenceBatch(b *testing.B) {
	probs := make([]float32, 32*1000)
	for i := range probs {
		probs[i] = float32(i%97) / 1000
	}
	in := marshal(b, inferResp([][]byte{rawF32(probs...)}, inferOut("probs", "FP32", []int64{32, 1000}, nil)))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ModelInferConfidence(in, "probs"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPredictConfidence reads 1000 classes from packed float_val, as
// TF-Serving answers by default.
func BenchmarkPredictConfidence(b *testing.B) {
	t := tfTensor(tensorflowpb.DataType_DT_FLOAT, 1, 1000)
	t.FloatVal = make([]float32, 1000)
	for i := range t.FloatVal {
		t.FloatVal[i] = float32(i%97) / 1000
	}
	in := marshal(b, predictResp(map[string]*tensorflowpb.TensorProto{"probs": t}))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := PredictConfidence(in, "probs"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRewritePredictTarget(b *testing.B) {
	req := predictRequest(&tfservingpb.ModelSpec{Name: "half_plus_two",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(1)}})
	req.Inputs["x"] = &tensorflowpb.TensorProto{Dtype: tensorflowpb.DataType_DT_FLOAT, TensorContent: make([]byte, 1<<20)}
	in := marshal(b, req)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RewritePredictTarget(in, "half_plus_two_big", "2"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTargetScanner feeds a 1 MiB request body to a reused scanner
// in the chunks HTTP/2 delivers, beside copying the same chunks once (what
// any proxy that buffers the message pays at least). The tensor is skipped
// by its length, so the scan costs O(1) per chunk: "1KiB" does 16 times
// the chunks of "16KiB" for the same bytes.
func BenchmarkTargetScanner(b *testing.B) {
	kserve := grpcFrame(marshal(b, inferRequest("simple", "1", 1<<20)))
	req := predictRequest(&tfservingpb.ModelSpec{Name: "half_plus_two",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(1)}})
	req.Inputs["x"] = &tensorflowpb.TensorProto{Dtype: tensorflowpb.DataType_DT_FLOAT, TensorContent: make([]byte, 1<<20)}
	tf := grpcFrame(marshal(b, req))
	scan := func(kind TargetKind, body []byte, chunk int) func(*testing.B) {
		return func(b *testing.B) {
			chunks := cutEvery(body, chunk)
			s := NewTargetScanner(kind)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				s.Reset(kind)
				for _, c := range chunks {
					if err := s.Feed(c); err != nil {
						b.Fatal(err)
					}
				}
				if m, _ := s.TargetBytes(); !s.Done() || s.Changed() || len(m) == 0 {
					b.Fatal("no target")
				}
			}
		}
	}
	b.Run("kserve/1MiB/16KiB", scan(KServeTarget, kserve, 16<<10))
	b.Run("kserve/1MiB/1KiB", scan(KServeTarget, kserve, 1<<10))
	b.Run("tfserving/1MiB/16KiB", scan(TFServingTarget, tf, 16<<10))
	b.Run("copy/1MiB/16KiB", func(b *testing.B) {
		chunks := cutEvery(kserve, 16<<10)
		dst := make([]byte, len(kserve))
		b.SetBytes(int64(len(kserve)))
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			for _, c := range chunks {
				n += copy(dst[n:], c)
			}
		}
	})
}

// BenchmarkScanFeatures reads the features of a small request (the simple
// model's two [1,16] INT32 inputs) and of a 1 MiB one (an FP32 image
// batch), whole and from its first 16 KiB as the relay has a request it
// forwards as it arrives: the tensor bytes are skipped by length, so the
// cost does not grow with them.
func BenchmarkScanFeatures(b *testing.B) {
	small := inferRequest("simple", "1", 64)
	small.Inputs = append(small.Inputs, &kservepb.ModelInferRequest_InferInputTensor{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}})
	big := &kservepb.ModelInferRequest{ModelName: "resnet", ModelVersion: "1", Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "FP32", Shape: []int64{2, 3, 224, 224}}}, RawInputContents: [][]byte{make([]byte, 1<<20)}}
	tf := &tfservingpb.PredictRequest{ModelSpec: &tfservingpb.ModelSpec{Name: "resnet"}, Inputs: map[string]*tensorflowpb.TensorProto{
		"images": tfInput(tensorflowpb.DataType_DT_FLOAT, 1<<20, 2, 224, 224, 3)}}
	for _, c := range []struct {
		name string
		kind TargetKind
		msg  []byte
		read int
	}{
		{"kserve-small", KServeTarget, marshal(b, small), -1},
		{"kserve-1MiB", KServeTarget, marshal(b, big), -1},
		{"kserve-1MiB-first16KiB", KServeTarget, marshal(b, big), 16 << 10},
		{"tfserving-1MiB", TFServingTarget, marshal(b, tf), -1},
	} {
		b.Run(c.name, func(b *testing.B) {
			msg := c.msg
			if c.read > 0 {
				msg = msg[:c.read]
			}
			var f Features
			b.ReportAllocs()
			for b.Loop() {
				if err := ScanFeatures(c.kind, msg, int64(len(c.msg)), &f); err != nil || f.Inputs == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
