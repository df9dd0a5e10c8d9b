package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// described is what a test compares of Features: the kept inputs as
// AppendString writes them, the input count and the rows.
func described(f *Features) string {
	var b []byte
	for i := range f.Kept() {
		if i > 0 {
			b = append(b, ' ')
		}
		b = f.In[i].AppendString(b)
	}
	return fmt.Sprintf("inputs=%d rows=%d [%s]", f.Inputs, f.Rows, b)
}

// describeShape is AppendString for a decoded input.
func describeShape(name, datatype string, shape []int64) string {
	var b strings.Builder
	if len(name) > MaxFeatureName {
		name = name[:MaxFeatureName] + "..."
	}
	if len(datatype) > maxFeatureDatatype {
		datatype = datatype[:maxFeatureDatatype]
	}
	fmt.Fprintf(&b, "%s:%s[", name, datatype)
	for i, d := range shape {
		if i == MaxFeatureDims {
			b.WriteString(",...")
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// kserveWant is described for a decoded ModelInferRequest.
func kserveWant(m *kservepb.ModelInferRequest) string {
	var parts []string
	var rows int64
	for i, in := range m.GetInputs() {
		if i == 0 && len(in.Shape) > 0 {
			rows = in.Shape[0]
		}
		if i < MaxFeatureInputs {
			parts = append(parts, describeShape(in.Name, in.Datatype, in.Shape))
		}
	}
	return fmt.Sprintf("inputs=%d rows=%d [%s]", len(m.GetInputs()), rows, strings.Join(parts, " "))
}

// dtypeName is a DataType's name as Features gives it.
func dtypeName(d tensorflowpb.DataType) string {
	if s, ok := tensorflowpb.DataType_name[int32(d)]; ok {
		return s
	}
	return fmt.Sprintf("DT_%d", int32(d))
}

// predictWant is described for a decoded PredictRequest of at most
// MaxFeatureInputs inputs: by name.
func predictWant(m *tfservingpb.PredictRequest) string {
	keys := make([]string, 0, len(m.GetInputs()))
	for k := range m.GetInputs() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	var rows int64
	for i, k := range keys {
		t := m.Inputs[k]
		var shape []int64
		for _, d := range t.GetTensorShape().GetDim() {
			shape = append(shape, d.Size)
		}
		if i == 0 && len(shape) > 0 {
			rows = shape[0]
		}
		parts = append(parts, describeShape(k, dtypeName(t.GetDtype()), shape))
	}
	return fmt.Sprintf("inputs=%d rows=%d [%s]", len(keys), rows, strings.Join(parts, " "))
}

func tfInput(dt tensorflowpb.DataType, content int, dims ...int64) *tensorflowpb.TensorProto {
	t := &tensorflowpb.TensorProto{Dtype: dt, TensorShape: &tensorflowpb.TensorShapeProto{}, TensorContent: make([]byte, content)}
	for _, d := range dims {
		t.TensorShape.Dim = append(t.TensorShape.Dim, &tensorflowpb.TensorShapeProto_Dim{Size: d})
	}
	return t
}

func TestScanFeatures(t *testing.T) {
	manyDims := []int64{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	longName := strings.Repeat("n", 100)
	var nine []*kservepb.ModelInferRequest_InferInputTensor
	for i := range 9 {
		nine = append(nine, &kservepb.ModelInferRequest_InferInputTensor{Name: fmt.Sprint("in", i), Datatype: "FP16", Shape: []int64{int64(i + 1)}})
	}
	simple := inferRequest("simple", "1", 128)
	simple.Inputs = append(simple.Inputs, &kservepb.ModelInferRequest_InferInputTensor{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}})
	cases := []struct {
		name string
		kind TargetKind
		msg  proto.Message
		want string
	}{
		{"kserve simple", KServeTarget, simple, "inputs=2 rows=1 [INPUT0:INT32[1,16] INPUT1:INT32[1,16]]"},
		{"kserve image batch", KServeTarget, &kservepb.ModelInferRequest{ModelName: "resnet",
			Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{8, 3, 224, 224}}},
			RawInputContents: [][]byte{make([]byte, 1000)}}, "inputs=1 rows=8 [INPUT0:FP32[8,3,224,224]]"},
		{"kserve no inputs", KServeTarget, &kservepb.ModelInferRequest{ModelName: "m"}, "inputs=0 rows=0 []"},
		{"kserve scalar first", KServeTarget, &kservepb.ModelInferRequest{
			Inputs: []*kservepb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BOOL"}, {Name: "x", Datatype: "FP32", Shape: []int64{4}}}},
			"inputs=2 rows=0 [s:BOOL[] x:FP32[4]]"},
		{"kserve nine inputs, ten dims, long name", KServeTarget, &kservepb.ModelInferRequest{Inputs: append([]*kservepb.ModelInferRequest_InferInputTensor{
			{Name: longName, Datatype: "UINT8", Shape: manyDims}}, nine...)},
			"inputs=10 rows=2 [" + longName[:MaxFeatureName] + "...:UINT8[2,3,4,5,6,7,8,9,...] in0:FP16[1] in1:FP16[2] in2:FP16[3] in3:FP16[4] in4:FP16[5] in5:FP16[6] in6:FP16[7]]"},
		{"tfserving two inputs by name", TFServingTarget, &tfservingpb.PredictRequest{
			ModelSpec: &tfservingpb.ModelSpec{Name: "m", VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(2)}},
			Inputs: map[string]*tensorflowpb.TensorProto{
				"mask":   tfInput(tensorflowpb.DataType_DT_INT64, 64, 4, 16),
				"images": tfInput(tensorflowpb.DataType_DT_FLOAT, 4096, 4, 224, 224, 3),
			}}, "inputs=2 rows=4 [images:DT_FLOAT[4,224,224,3] mask:DT_INT64[4,16]]"},
		{"tfserving float_val", TFServingTarget, predictRequest(&tfservingpb.ModelSpec{Name: "half_plus_two"}), "inputs=1 rows=0 [x:DT_FLOAT[]]"},
		{"tfserving unnamed dtype", TFServingTarget, &tfservingpb.PredictRequest{Inputs: map[string]*tensorflowpb.TensorProto{
			"x": tfInput(101, 0, 3)}}, "inputs=1 rows=3 [x:DT_101[3]]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := marshal(t, c.msg)
			var f Features
			if err := ScanFeatures(c.kind, b, int64(len(b)), &f); err != nil {
				t.Fatal(err)
			}
			if got := described(&f); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			if f.Bytes != int64(len(b)) || f.Partial {
				t.Errorf("Bytes %d Partial %v, want %d false", f.Bytes, f.Partial, len(b))
			}
		})
	}
}

// TestScanFeaturesMerges checks the proto3 merge rules on bytes a
// serializer does not write but a client may send: a KServe shape in
// packed and unpacked pieces, a later name, a TF map key sent twice (the
// later entry replaces the earlier) and a TensorProto in two pieces
// (their shapes add up).
func TestScanFeaturesMerges(t *testing.T) {
	in := marshal(t, &kservepb.ModelInferRequest_InferInputTensor{Name: "a", Datatype: "FP32", Shape: []int64{8, 3}})
	in = append(in, 0x18, 0x07)                       // shape: 7, unpacked
	in = append(in, 0x0a, 0x01, 'b')                  // name: "b"
	in = append(in, 0x1a, 0x02, 0x05, 0x06)           // shape: 5, 6, packed
	msg := append([]byte{0x2a, byte(len(in))}, in...) // inputs
	checkAgainstDecoded(t, msg)
	var f Features
	if err := ScanFeatures(KServeTarget, msg, int64(len(msg)), &f); err != nil || described(&f) != "inputs=1 rows=8 [b:FP32[8,3,7,5,6]]" {
		t.Fatalf("got %s, %v", described(&f), err)
	}

	entry := func(key string, t *tensorflowpb.TensorProto) []byte {
		m := &tfservingpb.PredictRequest{Inputs: map[string]*tensorflowpb.TensorProto{key: t}}
		b, _ := proto.Marshal(m)
		return b
	}
	piece := marshal(t, &tensorflowpb.TensorProto{TensorShape: &tensorflowpb.TensorShapeProto{
		Dim: []*tensorflowpb.TensorShapeProto_Dim{{Size: 9}}}})
	split := append([]byte{0x12, byte(len(piece))}, piece...) // a second value
	msg = slices.Concat(entry("x", tfInput(tensorflowpb.DataType_DT_FLOAT, 0, 1, 2)),
		entry("y", tfInput(tensorflowpb.DataType_DT_INT32, 0, 5)),
		entry("x", tfInput(tensorflowpb.DataType_DT_HALF, 0, 2, 4)))
	msg = append(msg[:len(msg):len(msg)], 0x12, byte(len(split)+3), 0x0a, 0x01, 'y')
	msg = append(msg, split...)
	checkAgainstDecoded(t, msg)
	if err := ScanFeatures(TFServingTarget, msg, int64(len(msg)), &f); err != nil || described(&f) != "inputs=2 rows=2 [x:DT_HALF[2,4] y:DT_INVALID[9]]" {
		t.Fatalf("got %s, %v", described(&f), err)
	}
}

// TestScanFeaturesPartial reads a request from its first bytes, as the
// relay has them when it forwards a large request as it arrives: the
// inputs come before the tensor contents, so they are all there.
func TestScanFeaturesPartial(t *testing.T) {
	req := &kservepb.ModelInferRequest{ModelName: "resnet", Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "FP32", Shape: []int64{2, 3, 224, 224}}, {Name: "INPUT1", Datatype: "INT64", Shape: []int64{2, 1}}},
		RawInputContents: [][]byte{make([]byte, 2*3*224*224*4), make([]byte, 16)}}
	b := marshal(t, req)
	var f Features
	if err := ScanFeatures(KServeTarget, b[:16<<10], int64(len(b)), &f); err != nil {
		t.Fatal(err)
	}
	if got, want := described(&f), kserveWant(req); got != want || !f.Partial || f.Bytes != int64(len(b)) {
		t.Fatalf("got %s partial=%v bytes=%d, want %s partial bytes=%d", got, f.Partial, f.Bytes, want, len(b))
	}

	// TF-Serving keeps each input's contents in its entry: a prefix has
	// the inputs up to the first cut one, whose dimensions read so far
	// are kept once its name is known.
	preq := &tfservingpb.PredictRequest{Inputs: map[string]*tensorflowpb.TensorProto{
		"a": tfInput(tensorflowpb.DataType_DT_FLOAT, 1<<16, 16, 1024), "b": tfInput(tensorflowpb.DataType_DT_FLOAT, 1<<16, 16, 1024)}}
	b = marshal(t, preq) // deterministic: "a" first
	if err := ScanFeatures(TFServingTarget, b[:1<<10], int64(len(b)), &f); err != nil {
		t.Fatal(err)
	}
	if got := described(&f); got != "inputs=1 rows=16 [a:DT_FLOAT[16,1024]]" || !f.Partial {
		t.Fatalf("got %s partial=%v", got, f.Partial)
	}
	// A whole message that ends early is malformed, not partial.
	if err := ScanFeatures(TFServingTarget, b[:1<<10], 1<<10, &f); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated message: %v, want ErrMalformed", err)
	}
}

// checkAgainstDecoded checks that ScanFeatures agrees with proto.Unmarshal
// for msg, as either request kind, wherever proto accepts it; and that
// every prefix of msg reads without error, its complete inputs as the
// whole message's.
func checkAgainstDecoded(t *testing.T, msg []byte) {
	t.Helper()
	var f, p Features
	var km kservepb.ModelInferRequest
	kerr := ScanFeatures(KServeTarget, msg, int64(len(msg)), &f)
	if proto.Unmarshal(msg, &km) == nil {
		if kerr != nil {
			t.Fatalf("proto accepts a ModelInferRequest, ScanFeatures fails: %v", kerr)
		}
		if got, want := described(&f), kserveWant(&km); got != want {
			t.Fatalf("ModelInferRequest: got %s, proto says %s", got, want)
		}
	}
	if kerr == nil {
		for _, n := range []int{0, 1, len(msg) / 3, len(msg) / 2, len(msg) - 1} {
			if n < 0 || n >= len(msg) {
				continue
			}
			if err := ScanFeatures(KServeTarget, msg[:n], int64(len(msg)), &p); err != nil || !p.Partial {
				t.Fatalf("prefix %d: %v partial=%v", n, err, p.Partial)
			}
			// All but the last input read are whole.
			for i := range max(len(p.Kept())-1, 0) {
				if !bytes.Equal(p.In[i].AppendString(nil), f.In[i].AppendString(nil)) {
					t.Fatalf("prefix %d input %d: %s, whole message %s", n, i, p.In[i].AppendString(nil), f.In[i].AppendString(nil))
				}
			}
		}
	}
	var pm tfservingpb.PredictRequest
	perr := ScanFeatures(TFServingTarget, msg, int64(len(msg)), &f)
	if proto.Unmarshal(msg, &pm) == nil {
		if perr != nil {
			t.Fatalf("proto accepts a PredictRequest, ScanFeatures fails: %v", perr)
		}
		if len(pm.Inputs) <= MaxFeatureInputs {
			if got, want := described(&f), predictWant(&pm); got != want {
				t.Fatalf("PredictRequest: got %s, proto says %s", got, want)
			}
		} else if f.Inputs < len(pm.Inputs) {
			t.Fatalf("PredictRequest: %d inputs counted, proto has %d", f.Inputs, len(pm.Inputs))
		}
	}
	if perr == nil && len(msg) > 0 {
		if err := ScanFeatures(TFServingTarget, msg[:len(msg)/2], int64(len(msg)), &p); err != nil || !p.Partial {
			t.Fatalf("half: %v partial=%v", err, p.Partial)
		}
	}
}

// randomRequests returns n valid requests of each kind made from seed:
// up to 10 inputs of up to 10 dimensions, names up to 80 bytes.
func randomRequests(seed uint64, n int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	dtypes := []string{"FP32", "FP16", "INT64", "BYTES", "BOOL", "UINT8"}
	shape := func() []int64 {
		s := make([]int64, r.IntN(11))
		for i := range s {
			s[i] = r.Int64N(1<<12) - 2
		}
		return s
	}
	name := func() string {
		return strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(80)) + fmt.Sprint(r.IntN(100))
	}
	var out [][]byte
	for range n {
		km := &kservepb.ModelInferRequest{ModelName: name(), Id: "x"}
		pm := &tfservingpb.PredictRequest{ModelSpec: &tfservingpb.ModelSpec{Name: name()}, Inputs: map[string]*tensorflowpb.TensorProto{}}
		for range r.IntN(11) {
			km.Inputs = append(km.Inputs, &kservepb.ModelInferRequest_InferInputTensor{Name: name(), Datatype: dtypes[r.IntN(len(dtypes))], Shape: shape()})
			km.RawInputContents = append(km.RawInputContents, make([]byte, r.IntN(300)))
			pm.Inputs[name()] = tfInput(tensorflowpb.DataType(r.IntN(30)), r.IntN(300), shape()...)
		}
		kb, _ := proto.Marshal(km)
		pb, _ := proto.Marshal(pm) // map order as Go writes it
		out = append(out, kb, pb)
	}
	return out
}

func TestScanFeaturesRandom(t *testing.T) {
	for _, b := range randomRequests(29, 300) {
		checkAgainstDecoded(t, b)
	}
}

// FuzzScanFeatures checks that the scan never panics and agrees with
// proto.Unmarshal on any bytes it accepts, prefixes included.
func FuzzScanFeatures(f *testing.F) {
	for _, b := range randomRequests(1, 5) {
		f.Add(b)
	}
	f.Add(marshal(f, inferRequest("simple", "1", 32)))
	f.Add([]byte{0x2a, 0x04, 0x1a, 0x02, 0x05, 0x06})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAgainstDecoded(t, b)
	})
}

// TestScanFeaturesAllocs: the scan is part of every relayed call.
func TestScanFeaturesAllocs(t *testing.T) {
	for _, b := range randomRequests(7, 3) {
		var f Features
		if n := testing.AllocsPerRun(50, func() {
			_ = ScanFeatures(KServeTarget, b, int64(len(b)), &f)
			_ = ScanFeatures(TFServingTarget, b, int64(len(b)), &f)
		}); n != 0 {
			t.Fatalf("%v allocations per scan", n)
		}
	}
}

func TestDTypeNames(t *testing.T) {
	for v, name := range tensorflowpb.DataType_name {
		if got := string(appendDTypeName(nil, v)); got != name {
			t.Errorf("DataType %d: %q, want %q", v, got, name)
		}
	}
}
