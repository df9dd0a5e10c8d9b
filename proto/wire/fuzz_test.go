package wire

import (
	"strconv"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
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

// FuzzRewriteModelInferTarget checks that the target rewrite never panics,
// accepts exactly the bytes ModelInferTarget accepts, reads back with the
// new name and version, and, where proto reads the input, changes nothing
// else.
func FuzzRewriteModelInferTarget(f *testing.F) {
	f.Add(marshal(f, inferRequest("simple", "1", 32)), "2")
	f.Add(marshal(f, inferRequest("simple", "", 0)), "")
	f.Add(marshal(f, &kservepb.ModelMetadataRequest{Name: "m", Version: "2"}), "latest")
	f.Add(concat(marshal(f, inferRequest("a", "1", 4)), []byte{0x12, 0x01, '9', 0x10, 0x01}), "3")
	f.Fuzz(func(t *testing.T, b []byte, version string) {
		_, _, scanErr := ModelInferTarget(b)
		out, err := RewriteModelInferTarget(b, "renamed", version)
		if (scanErr == nil) != (err == nil) {
			t.Fatalf("ModelInferTarget error %v, RewriteModelInferTarget error %v", scanErr, err)
		}
		if err != nil {
			return
		}
		if m, v, err := ModelInferTarget(out); err != nil || m != "renamed" || v != version {
			t.Fatalf("after rewrite got (%q, %q, %v), want (%q, %q)", m, v, err, "renamed", version)
		}
		var msg kservepb.ModelInferRequest
		if proto.Unmarshal(b, &msg) != nil || !utf8.ValidString(version) {
			return
		}
		msg.ModelName, msg.ModelVersion = "renamed", version
		var got kservepb.ModelInferRequest
		if err := proto.Unmarshal(out, &got); err != nil {
			t.Fatalf("proto reads the input but not the rewrite: %v", err)
		}
		if !proto.Equal(&got, &msg) {
			t.Fatalf("got %v, want %v", &got, &msg)
		}
	})
}

// FuzzRewritePredictTarget is FuzzRewriteModelInferTarget for the
// TF-Serving layout. The rewrite drops old versions unread, so it may
// accept bytes PredictTarget refuses (a broken Int64Value), never the
// reverse.
func FuzzRewritePredictTarget(f *testing.F) {
	f.Add(marshal(f, predictRequest(&tfservingpb.ModelSpec{Name: "m", SignatureName: "s",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(3)}})), "4")
	f.Add(marshal(f, predictRequest(&tfservingpb.ModelSpec{Name: "m",
		VersionChoice: &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "x"}})), "stable")
	f.Add(marshal(f, predictRequest(nil)), "-7")
	f.Add([]byte{0x0a, 0x03, 0x12, 0x01, 0x08}, "")
	f.Fuzz(func(t *testing.T, b []byte, version string) {
		_, _, scanErr := PredictTarget(b)
		out, err := RewritePredictTarget(b, "renamed", version)
		if scanErr == nil && err != nil {
			t.Fatalf("RewritePredictTarget on scannable bytes: %v", err)
		}
		if err != nil {
			return
		}
		want := version
		if v, err := strconv.ParseInt(version, 10, 64); err == nil {
			want = strconv.FormatInt(v, 10)
		}
		if m, v, err := PredictTarget(out); err != nil || m != "renamed" || v != want {
			t.Fatalf("after rewrite got (%q, %q, %v), want (%q, %q)", m, v, err, "renamed", want)
		}
		var msg tfservingpb.PredictRequest
		if proto.Unmarshal(b, &msg) != nil || !utf8.ValidString(version) {
			return
		}
		spec := msg.GetModelSpec()
		if spec == nil {
			spec = &tfservingpb.ModelSpec{}
		}
		spec.Name, spec.VersionChoice = "renamed", nil
		if version != "" {
			if v, err := strconv.ParseInt(version, 10, 64); err == nil {
				spec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(v)}
			} else {
				spec.VersionChoice = &tfservingpb.ModelSpec_VersionLabel{VersionLabel: version}
			}
		}
		msg.ModelSpec = spec
		var got tfservingpb.PredictRequest
		if err := proto.Unmarshal(out, &got); err != nil {
			t.Fatalf("proto reads the input but not the rewrite: %v", err)
		}
		if !proto.Equal(&got, &msg) {
			t.Fatalf("got %v, want %v", &got, &msg)
		}
	})
}

// FuzzModelInferConfidence checks that the reader never panics and, where
// proto reads the bytes, agrees with the reference rule on the decoded
// response: same value, same kind of error.
func FuzzModelInferConfidence(f *testing.F) {
	f.Add(marshal(f, inferResp([][]byte{rawF32(0.1, 0.7, 0.2, 0.5, 0.4, 0.1)}, inferOut("probs", "FP32", []int64{2, 3}, nil))))
	f.Add(marshal(f, inferResp(nil, inferOut("probs", "FP32", []int64{1, 3},
		&kservepb.InferTensorContents{Fp32Contents: []float32{0.1, 0.7, 0.2}}))))
	f.Add(marshal(f, inferResp(nil, inferOut("probs", "FP64", []int64{2},
		&kservepb.InferTensorContents{Fp64Contents: []float64{0.3, 0.7}}))))
	f.Add(marshal(f, inferResp([][]byte{rawF32(1, 2), rawU16(0x3400, 0x3a00)},
		inferOut("x", "FP32", []int64{2}, nil), inferOut("probs", "FP16", []int64{1, 2}, nil))))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ModelInferConfidence(b, "probs")
		var m kservepb.ModelInferResponse
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		ref, refErr := refInferConfidence(&m, "probs")
		if errKind(err) != errKind(refErr) || (err == nil && got != ref) {
			t.Fatalf("got (%v, %v), reference (%v, %v)", got, err, ref, refErr)
		}
	})
}

// FuzzPredictConfidence is FuzzModelInferConfidence for PredictResponse.
func FuzzPredictConfidence(f *testing.F) {
	tp := tfTensor(tensorflowpb.DataType_DT_FLOAT, 2, 2)
	tp.FloatVal = []float32{0.1, 0.9, 0.6, 0.4}
	f.Add(marshal(f, predictResp(map[string]*tensorflowpb.TensorProto{"probs": tp})))
	tc := tfTensor(tensorflowpb.DataType_DT_DOUBLE, 1, 2)
	tc.TensorContent = rawF64(0.2, 0.8)
	f.Add(marshal(f, predictResp(map[string]*tensorflowpb.TensorProto{"probs": tc, "other": tp})))
	th := tfTensor(tensorflowpb.DataType_DT_HALF, 3)
	th.HalfVal = []int32{0x3400, 0x3a00, 0x3400}
	f.Add(marshal(f, predictResp(map[string]*tensorflowpb.TensorProto{"probs": th})))
	f.Add(outputEntry("probs", concat(marshal(f, tfTensor(tensorflowpb.DataType_DT_FLOAT, 1, 2)), unpackedFloatVal(0.3, 0.7))))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := PredictConfidence(b, "probs")
		var m tfservingpb.PredictResponse
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		ref, refErr := refPredictConfidence(&m, "probs")
		if errKind(err) != errKind(refErr) || (err == nil && got != ref) {
			t.Fatalf("got (%v, %v), reference (%v, %v)", got, err, ref, refErr)
		}
	})
}
