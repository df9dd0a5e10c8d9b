package wire

import (
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

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
