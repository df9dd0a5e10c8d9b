package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// inferRequest is a ModelInferRequest with every kind of field set, so the
// scanner has to skip maps, nested messages and raw tensor bytes.
func inferRequest(name, version string, raw int) *kservepb.ModelInferRequest {
	return &kservepb.ModelInferRequest{
		ModelName:    name,
		ModelVersion: version,
		Id:           "req-1",
		Parameters: map[string]*kservepb.InferParameter{
			"priority": {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 1}},
		},
		Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
		},
		Outputs:          []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0"}},
		RawInputContents: [][]byte{bytes.Repeat([]byte{7}, raw)},
	}
}

func predictRequest(spec *tfservingpb.ModelSpec) *tfservingpb.PredictRequest {
	return &tfservingpb.PredictRequest{
		ModelSpec: spec,
		Inputs: map[string]*tensorflowpb.TensorProto{
			"x": {Dtype: tensorflowpb.DataType_DT_FLOAT, FloatVal: []float32{1, 2, 5}},
		},
		OutputFilter: []string{"y"},
	}
}

// specWant returns what PredictTarget must report for a decoded spec.
func specWant(s *tfservingpb.ModelSpec) (string, string) {
	switch v := s.GetVersionChoice().(type) {
	case *tfservingpb.ModelSpec_Version:
		return s.GetName(), strconv.FormatInt(v.Version.GetValue(), 10)
	case *tfservingpb.ModelSpec_VersionLabel:
		return s.GetName(), v.VersionLabel
	}
	return s.GetName(), ""
}

func TestModelInferTarget(t *testing.T) {
	a := marshal(t, inferRequest("simple", "1", 64))
	b := marshal(t, inferRequest("resnet", "", 0))
	cases := []struct {
		name string
		in   []byte
	}{
		{"infer", a},
		{"no version", b},
		{"empty message", nil},
		{"only raw contents", marshal(t, &kservepb.ModelInferRequest{RawInputContents: [][]byte{{1, 2, 3}}})},
		// proto3: the last occurrence of a scalar field wins.
		{"concatenated, last wins", concat(a, b)},
		{"version kept from first", concat(a, marshal(t, &kservepb.ModelInferRequest{ModelName: "other"}))},
		{"metadata request", marshal(t, &kservepb.ModelMetadataRequest{Name: "simple", Version: "3"})},
		{"ready request", marshal(t, &kservepb.ModelReadyRequest{Name: "simple", Version: "2"})},
		{"config request", marshal(t, &kservepb.ModelConfigRequest{Name: "cfg"})},
		{"statistics request", marshal(t, &kservepb.ModelStatisticsRequest{Name: "st", Version: "9"})},
		// A field 1 with the wrong wire type is an unknown field to proto.
		{"name with wrong wire type", concat(a, []byte{0x08, 0x01})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want kservepb.ModelInferRequest
			if err := proto.Unmarshal(tc.in, &want); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			model, version, err := ModelInferTarget(tc.in)
			if err != nil {
				t.Fatalf("ModelInferTarget: %v", err)
			}
			if model != want.ModelName || version != want.ModelVersion {
				t.Errorf("got (%q, %q), want (%q, %q)", model, version, want.ModelName, want.ModelVersion)
			}
		})
	}
}

// specHolder returns an empty message of the type a test case marshalled:
// cases named "metadata request" hold a GetModelMetadataRequest.
func specHolder(name string) interface {
	proto.Message
	GetModelSpec() *tfservingpb.ModelSpec
} {
	if name == "metadata request" {
		return &tfservingpb.GetModelMetadataRequest{}
	}
	return &tfservingpb.PredictRequest{}
}

func TestPredictTarget(t *testing.T) {
	withVersion := &tfservingpb.ModelSpec{Name: "half_plus_two", SignatureName: "serving_default",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(123)}}
	withLabel := &tfservingpb.ModelSpec{Name: "half_plus_two",
		VersionChoice: &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "stable"}}
	versionZero := &tfservingpb.ModelSpec{Name: "m",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(0)}}
	negative := &tfservingpb.ModelSpec{Name: "m",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(-5)}}
	cases := []struct {
		name string
		in   []byte
	}{
		{"version", marshal(t, predictRequest(withVersion))},
		{"label", marshal(t, predictRequest(withLabel))},
		{"version zero", marshal(t, predictRequest(versionZero))},
		{"negative version", marshal(t, predictRequest(negative))},
		{"name only", marshal(t, predictRequest(&tfservingpb.ModelSpec{Name: "n"}))},
		{"no model spec", marshal(t, predictRequest(nil))},
		{"empty", nil},
		// Repeated message fields merge: name from the second, version
		// kept from the first.
		{"merged specs", concat(marshal(t, predictRequest(withVersion)),
			marshal(t, &tfservingpb.PredictRequest{ModelSpec: &tfservingpb.ModelSpec{Name: "second"}}))},
		// A label after a version replaces the oneof member, and back again.
		{"label replaces version", concat(marshal(t, predictRequest(withVersion)), marshal(t, predictRequest(withLabel)))},
		{"version replaces label", concat(marshal(t, predictRequest(withLabel)), marshal(t, predictRequest(versionZero)))},
		{"metadata request", marshal(t, &tfservingpb.GetModelMetadataRequest{ModelSpec: withVersion, MetadataField: []string{"signature_def"}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := specHolder(tc.name)
			if err := proto.Unmarshal(tc.in, want); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			wantModel, wantVersion := specWant(want.GetModelSpec())
			model, version, err := PredictTarget(tc.in)
			if err != nil {
				t.Fatalf("PredictTarget: %v", err)
			}
			if model != wantModel || version != wantVersion {
				t.Errorf("got (%q, %q), want (%q, %q)", model, version, wantModel, wantVersion)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	good := marshal(t, inferRequest("simple", "1", 16))
	goodPredict := marshal(t, predictRequest(&tfservingpb.ModelSpec{Name: "m"}))
	cases := []struct {
		name string
		in   []byte
	}{
		{"truncated", good[:len(good)-3]},
		{"truncated predict", goodPredict[:len(goodPredict)-1]},
		{"field number zero", []byte{0x02, 0x00}},
		{"varint overflow", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"length past end", []byte{0x0a, 0x05, 'a'}},
		{"end group at top", []byte{0x0c}},
		{"reserved wire type", []byte{0x0e}},
		{"bad model spec", []byte{0x0a, 0x02, 0x0a, 0x05}},
		{"bad Int64Value", []byte{0x0a, 0x03, 0x12, 0x01, 0x08}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// ModelInferTarget does not look inside model_spec, so the two
			// nested cases are valid ModelInferRequest bytes.
			if _, _, err := ModelInferTarget(tc.in); err == nil && tc.name != "bad model spec" && tc.name != "bad Int64Value" {
				t.Errorf("ModelInferTarget: no error")
			} else if err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("ModelInferTarget: %v does not wrap ErrMalformed", err)
			}
			if _, _, err := PredictTarget(tc.in); !errors.Is(err, ErrMalformed) {
				t.Errorf("PredictTarget: got %v, want ErrMalformed", err)
			}
			// Rewriting leaves the version untouched, so it does not look
			// inside the Int64Value.
			if _, err := RewritePredictName(tc.in, "x"); !errors.Is(err, ErrMalformed) && tc.name != "bad Int64Value" {
				t.Errorf("RewritePredictName: got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestRandomBytesDoNotPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64)
	for range 20000 {
		b := buf[:r.IntN(len(buf))]
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		_, _, _ = ModelInferTarget(b)
		_, _, _ = PredictTarget(b)
		_, _ = RewriteModelInferName(b, "x")
		_, _ = RewritePredictName(b, "x")
		_, _ = RewriteModelInferTarget(b, "x", "1")
		_, _ = RewritePredictTarget(b, "x", "1")
		_, _ = RewritePredictTarget(b, "x", "label")
		_, _ = ModelInferConfidence(b, "")
		_, _ = PredictConfidence(b, "")
		_, _ = ScanInferRequest(b)
		_, _ = ScanInferRequestChunks(split(b, byte(r.Uint32())))
		checkAgainstProto(t, b) // and never panics
	}
}

func TestRewriteModelInferName(t *testing.T) {
	cases := []struct {
		name string
		msg  proto.Message
	}{
		{"infer", inferRequest("simple", "1", 100)},
		{"no name", inferRequest("", "2", 10)},
		{"metadata", &kservepb.ModelMetadataRequest{Name: "a", Version: "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := marshal(t, tc.msg)
			orig := bytes.Clone(in)
			out, err := RewriteModelInferName(in, "simple_fallback")
			if err != nil {
				t.Fatalf("RewriteModelInferName: %v", err)
			}
			if !bytes.Equal(in, orig) {
				t.Fatal("input modified")
			}
			want := proto.Clone(tc.msg)
			fd := want.ProtoReflect().Descriptor().Fields().ByNumber(1)
			want.ProtoReflect().Set(fd, protoreflect.ValueOfString("simple_fallback"))
			got := want.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(out, got); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			// Name is field 1, so a deterministic marshal of the expected
			// message is byte for byte what a rewrite that keeps every other
			// field in order must produce.
			if !bytes.Equal(out, marshal(t, want)) {
				t.Error("rewritten bytes differ from a deterministic marshal of the expected message")
			}
		})
	}
	t.Run("duplicates removed", func(t *testing.T) {
		in := concat(marshal(t, inferRequest("a", "1", 4)), marshal(t, &kservepb.ModelInferRequest{ModelName: "b", Id: "x"}))
		out, err := RewriteModelInferName(in, "c")
		if err != nil {
			t.Fatal(err)
		}
		var want kservepb.ModelInferRequest
		if err := proto.Unmarshal(in, &want); err != nil {
			t.Fatal(err)
		}
		want.ModelName = "c"
		var got kservepb.ModelInferRequest
		if err := proto.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, &want) {
			t.Errorf("got %v, want %v", &got, &want)
		}
		if n := bytes.Count(out, []byte{0x0a, 0x01, 'c'}); n != 1 {
			t.Errorf("new name written %d times", n)
		}
	})
}

func TestRewritePredictName(t *testing.T) {
	withVersion := &tfservingpb.ModelSpec{Name: "half_plus_two", SignatureName: "serving_default",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(7)}}
	withLabel := &tfservingpb.ModelSpec{Name: "m", VersionChoice: &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "canary"}}
	cases := []struct {
		name string
		in   []byte
	}{
		{"version", marshal(t, predictRequest(withVersion))},
		{"label", marshal(t, predictRequest(withLabel))},
		{"no model spec", marshal(t, predictRequest(nil))},
		{"empty", nil},
		{"merged specs", concat(marshal(t, predictRequest(withVersion)), marshal(t, &tfservingpb.PredictRequest{
			ModelSpec: &tfservingpb.ModelSpec{Name: "second", SignatureName: "sig2"}}))},
		{"metadata request", marshal(t, &tfservingpb.GetModelMetadataRequest{ModelSpec: withLabel, MetadataField: []string{"signature_def"}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := bytes.Clone(tc.in)
			out, err := RewritePredictName(tc.in, "fallback")
			if err != nil {
				t.Fatalf("RewritePredictName: %v", err)
			}
			if !bytes.Equal(tc.in, orig) {
				t.Fatal("input modified")
			}
			want := specHolder(tc.name)
			if err := proto.Unmarshal(tc.in, want); err != nil {
				t.Fatal(err)
			}
			spec := proto.Clone(want.GetModelSpec()).(*tfservingpb.ModelSpec)
			if spec == nil {
				spec = &tfservingpb.ModelSpec{}
			}
			spec.Name = "fallback"
			want.ProtoReflect().Set(want.ProtoReflect().Descriptor().Fields().ByNumber(1), protoreflect.ValueOfMessage(spec.ProtoReflect()))
			got := specHolder(tc.name)
			if err := proto.Unmarshal(out, got); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			if model, _, _ := PredictTarget(out); model != "fallback" {
				t.Errorf("PredictTarget after rewrite = %q", model)
			}
		})
	}
	t.Run("byte exact", func(t *testing.T) {
		in := marshal(t, predictRequest(withVersion))
		out, err := RewritePredictName(in, "fallback")
		if err != nil {
			t.Fatal(err)
		}
		spec := proto.Clone(withVersion).(*tfservingpb.ModelSpec)
		spec.Name = "fallback"
		if want := marshal(t, predictRequest(spec)); !bytes.Equal(out, want) {
			t.Errorf("rewritten bytes differ from a deterministic marshal of the expected message")
		}
	})
}

func TestChunks(t *testing.T) {
	infer := marshal(t, inferRequest("simple", "1", 100))
	predict := marshal(t, predictRequest(&tfservingpb.ModelSpec{Name: "half_plus_two",
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(300)}}))
	for cut := range len(infer) {
		chunks := [][]byte{infer[:cut], nil, infer[cut:]}
		if m, v, err := ModelInferTargetChunks(chunks); err != nil || m != "simple" || v != "1" {
			t.Fatalf("cut %d: got (%q, %q, %v)", cut, m, v, err)
		}
		if _, _, err := ModelInferTargetChunks([][]byte{infer[:cut], infer[cut : len(infer)-1]}); err == nil {
			t.Fatalf("cut %d: truncated input accepted", cut)
		}
	}
	for cut := range len(predict) {
		chunks := [][]byte{predict[:cut], predict[cut:]}
		if m, v, err := PredictTargetChunks(chunks); err != nil || m != "half_plus_two" || v != "300" {
			t.Fatalf("cut %d: got (%q, %q, %v)", cut, m, v, err)
		}
	}
}
