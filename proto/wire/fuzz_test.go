package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// FuzzModelInferTarget checks that the scanner never panics, agrees with
// proto.Unmarshal whenever that accepts the bytes, and that a rewrite of
// bytes it accepts reads back with the new name and the old version.
func FuzzModelInferTarget(f *testing.F) {
	f.Add(marshal(f, inferRequest("simple", "1", 32)))
	f.Add(marshal(f, &kservepb.ModelMetadataRequest{Name: "m", Version: "2"}))
	f.Add([]byte{0x0a, 0x05, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		model, version, err := ModelInferTarget(b)
		var msg kservepb.ModelInferRequest
		if proto.Unmarshal(b, &msg) == nil {
			if err != nil {
				t.Fatalf("proto accepts the bytes, ModelInferTarget fails: %v", err)
			}
			if model != msg.ModelName || version != msg.ModelVersion {
				t.Fatalf("got (%q, %q), proto says (%q, %q)", model, version, msg.ModelName, msg.ModelVersion)
			}
		}
		if err != nil {
			return
		}
		out, err := RewriteModelInferName(b, "renamed")
		if err != nil {
			t.Fatalf("RewriteModelInferName on scannable bytes: %v", err)
		}
		m2, v2, err := ModelInferTarget(out)
		if err != nil || m2 != "renamed" || v2 != version {
			t.Fatalf("after rewrite got (%q, %q, %v), want (%q, %q)", m2, v2, err, "renamed", version)
		}
	})
}

// FuzzPredictTarget is FuzzModelInferTarget for the TF-Serving layout.
func FuzzPredictTarget(f *testing.F) {
	f.Add(marshal(f, predictRequest(&tfservingpb.ModelSpec{Name: "m",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(3)}})))
	f.Add(marshal(f, predictRequest(&tfservingpb.ModelSpec{Name: "m",
		VersionChoice: &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "x"}})))
	f.Fuzz(func(t *testing.T, b []byte) {
		model, version, err := PredictTarget(b)
		var msg tfservingpb.PredictRequest
		if proto.Unmarshal(b, &msg) == nil {
			if err != nil {
				t.Fatalf("proto accepts the bytes, PredictTarget fails: %v", err)
			}
			wm, wv := specWant(msg.GetModelSpec())
			if model != wm || version != wv {
				t.Fatalf("got (%q, %q), proto says (%q, %q)", model, version, wm, wv)
			}
		}
		if err != nil {
			return
		}
		out, err := RewritePredictName(b, "renamed")
		if err != nil {
			t.Fatalf("RewritePredictName on scannable bytes: %v", err)
		}
		m2, v2, err := PredictTarget(out)
		if err != nil || m2 != "renamed" || v2 != version {
			t.Fatalf("after rewrite got (%q, %q, %v), want (%q, %q)", m2, v2, err, "renamed", version)
		}
	})
}

// split cuts b into pieces at the cut points drawn from seed, so chunk
// scanners meet values that straddle chunk boundaries, empty chunks
// included.
func split(b []byte, seed byte) [][]byte {
	var out [][]byte
	step := int(seed%7) + 1
	for len(b) > 0 {
		n := min(step, len(b))
		out = append(out, b[:n], nil)
		b = b[n:]
		step = step%5 + 1
	}
	return out
}

// FuzzChunks checks that the chunk scanners agree with the flat ones on any
// input cut anywhere.
func FuzzChunks(f *testing.F) {
	f.Add(marshal(f, inferRequest("simple", "1", 300)), byte(3))
	f.Add(marshal(f, predictRequest(&tfservingpb.ModelSpec{Name: "half_plus_two",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(1 << 40)}})), byte(1))
	f.Add([]byte{0x0b, 0x08, 0x01, 0x0c, 0x0a, 0x01, 'm'}, byte(2)) // a group, then a name
	f.Fuzz(func(t *testing.T, b []byte, seed byte) {
		chunks := split(b, seed)
		m1, v1, err1 := ModelInferTarget(b)
		m2, v2, err2 := ModelInferTargetChunks(chunks)
		if m1 != m2 || v1 != v2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("ModelInferTarget (%q, %q, %v), chunks (%q, %q, %v)", m1, v1, err1, m2, v2, err2)
		}
		m1, v1, err1 = PredictTarget(b)
		m2, v2, err2 = PredictTargetChunks(chunks)
		if m1 != m2 || v1 != v2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("PredictTarget (%q, %q, %v), chunks (%q, %q, %v)", m1, v1, err1, m2, v2, err2)
		}
	})
}
