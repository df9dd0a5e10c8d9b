package wire

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func rawF32(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func rawF64(vals ...float64) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func rawU16(vals ...uint16) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

// inferOut is an InferOutputTensor with its data in contents.
func inferOut(name, datatype string, shape []int64, c *kservepb.InferTensorContents) *kservepb.ModelInferResponse_InferOutputTensor {
	return &kservepb.ModelInferResponse_InferOutputTensor{Name: name, Datatype: datatype, Shape: shape, Contents: c}
}

// inferResp is a ModelInferResponse with the fields around the outputs set,
// so the reader has to skip them.
func inferResp(raw [][]byte, outs ...*kservepb.ModelInferResponse_InferOutputTensor) *kservepb.ModelInferResponse {
	return &kservepb.ModelInferResponse{
		ModelName: "edge", ModelVersion: "1", Id: "req-1",
		Parameters: map[string]*kservepb.InferParameter{
			"sequence_end": {ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: true}},
		},
		Outputs:           outs,
		RawOutputContents: raw,
	}
}

// errKind names what a confidence reader answered, for comparing it with
// what a case expects.
func errKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNoOutput):
		return "no output"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	}
	return "other"
}

// refRows is the reference rule on decoded values: the minimum over rows of
// the row maxima, the last dimension being the row. Its errors carry the
// kinds errKind gives.
func refRows(vals []float64, shape []int64) (float64, error) {
	count, over := int64(1), false
	for _, d := range shape {
		if d < 0 {
			return 0, ErrMalformed
		}
		if d != 0 && count > math.MaxInt64/d {
			over = true
		}
		count *= d
	}
	for _, d := range shape {
		if d == 0 {
			count, over = 0, false
		}
	}
	if over || count != int64(len(vals)) {
		return 0, ErrMalformed
	}
	if count == 0 || len(shape) == 0 {
		return 0, errors.New("empty or scalar")
	}
	cols := int(shape[len(shape)-1])
	conf := math.Inf(1)
	for r := 0; r < len(vals); r += cols {
		rowMax := math.Inf(-1)
		for _, v := range vals[r : r+cols] {
			if math.IsNaN(v) {
				return 0, errors.New("NaN")
			}
			rowMax = max(rowMax, v)
		}
		conf = min(conf, rowMax)
	}
	return conf, nil
}

// decodeLE decodes raw little-endian elements of kind k, or reports that
// the bytes are not whole elements.
func decodeLE(b []byte, k elemKind) ([]float64, bool) {
	if len(b)%k.size() != 0 {
		return nil, false
	}
	var out []float64
	for ; len(b) > 0; b = b[k.size():] {
		switch k {
		case kindF32:
			out = append(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
		case kindF64:
			out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(b)))
		default:
			out = append(out, half(binary.LittleEndian.Uint16(b), k))
		}
	}
	return out, true
}

// refInferConfidence is ModelInferConfidence on a decoded response.
func refInferConfidence(m *kservepb.ModelInferResponse, output string) (float64, error) {
	i := -1
	for j, o := range m.Outputs {
		if o.Name == output {
			i = j
			break
		}
	}
	if i < 0 {
		return 0, ErrNoOutput
	}
	o := m.Outputs[i]
	// A raw entry missing for the output is found before the datatype is
	// looked at, as in ModelInferConfidence.
	if len(m.RawOutputContents) > 0 && i >= len(m.RawOutputContents) {
		return 0, ErrMalformed
	}
	kinds := map[string]elemKind{"FP32": kindF32, "FP64": kindF64, "FP16": kindF16, "BF16": kindBF16}
	k, ok := kinds[o.Datatype]
	if !ok {
		return 0, errors.New("datatype")
	}
	var vals []float64
	if len(m.RawOutputContents) > 0 {
		if vals, ok = decodeLE(m.RawOutputContents[i], k); !ok {
			return 0, ErrMalformed
		}
	} else if k == kindF32 {
		for _, v := range o.GetContents().GetFp32Contents() {
			vals = append(vals, float64(v))
		}
	} else if k == kindF64 {
		vals = o.GetContents().GetFp64Contents()
	}
	return refRows(vals, o.Shape)
}

// refPredictConfidence is PredictConfidence on a decoded response.
func refPredictConfidence(m *tfservingpb.PredictResponse, output string) (float64, error) {
	t, ok := m.Outputs[output]
	if !ok {
		return 0, ErrNoOutput
	}
	var shape []int64
	for _, d := range t.GetTensorShape().GetDim() {
		shape = append(shape, d.Size)
	}
	kinds := map[tensorflowpb.DataType]elemKind{tensorflowpb.DataType_DT_FLOAT: kindF32, tensorflowpb.DataType_DT_DOUBLE: kindF64,
		tensorflowpb.DataType_DT_HALF: kindF16, tensorflowpb.DataType_DT_BFLOAT16: kindBF16}
	k, ok := kinds[t.GetDtype()]
	if !ok {
		return 0, errors.New("dtype")
	}
	var vals []float64
	if len(t.TensorContent) > 0 {
		if vals, ok = decodeLE(t.TensorContent, k); !ok {
			return 0, ErrMalformed
		}
		return refRows(vals, shape)
	}
	switch k {
	case kindF32:
		for _, v := range t.FloatVal {
			vals = append(vals, float64(v))
		}
	case kindF64:
		vals = t.DoubleVal
	default:
		for _, v := range t.HalfVal {
			vals = append(vals, half(uint16(v), k))
		}
	}
	if len(vals) == 1 {
		// Broadcast: one element stands for a shape of more.
		n := int64(1)
		for _, d := range shape {
			if d <= 0 || n > math.MaxInt64/d {
				n = -1
				break
			}
			n *= d
		}
		if n > 1 {
			if math.IsNaN(vals[0]) {
				return 0, errors.New("NaN")
			}
			return vals[0], nil
		}
	}
	return refRows(vals, shape)
}

func TestModelInferConfidence(t *testing.T) {
	probs := []float32{0.1, 0.7, 0.2}
	batch := []float32{0.1, 0.8, 0.1, 0.5, 0.3, 0.2}
	fp32 := func(v ...float32) *kservepb.InferTensorContents {
		return &kservepb.InferTensorContents{Fp32Contents: v}
	}
	other := inferOut("logits", "FP32", []int64{1, 2}, nil)

	// A tensor whose fp32_contents come in two merged contents fields, the
	// second unpacked: proto reads [0.3, 0.6, 0.1].
	merged := marshal(t, inferOut("probs", "FP32", []int64{1, 3}, fp32(0.3, 0.6)))
	merged = protowire.AppendTag(merged, outContents, protowire.BytesType)
	merged = protowire.AppendBytes(merged, protowire.AppendFixed32(protowire.AppendTag(nil, contentsFP32, protowire.Fixed32Type), math.Float32bits(0.1)))
	mergedResp := protowire.AppendBytes(protowire.AppendTag(nil, inferRespOutputs, protowire.BytesType), merged)

	good := marshal(t, inferResp([][]byte{rawF32(probs...)}, inferOut("probs", "FP32", []int64{1, 3}, nil)))
	cases := []struct {
		name   string
		in     []byte
		output string
		want   float64
		err    string // errKind of the error wanted
		msg    string // in the error text
	}{
		{name: "contents [1,C]", in: marshal(t, inferResp(nil, inferOut("probs", "FP32", []int64{1, 3}, fp32(probs...)))), want: float64(float32(0.7))},
		{name: "contents [C]", in: marshal(t, inferResp(nil, inferOut("probs", "FP32", []int64{3}, fp32(probs...)))), want: float64(float32(0.7))},
		{name: "raw [1,C]", in: good, want: float64(float32(0.7))},
		{name: "contents batched", in: marshal(t, inferResp(nil, inferOut("probs", "FP32", []int64{2, 3}, fp32(batch...)))), want: float64(float32(0.5))},
		{name: "raw batched", in: marshal(t, inferResp([][]byte{rawF32(batch...)}, inferOut("probs", "FP32", []int64{2, 3}, nil))), want: float64(float32(0.5))},
		{name: "raw [N,T,C]", in: marshal(t, inferResp([][]byte{rawF32(0.9, 0.1, 0.4, 0.6, 0.2, 0.8, 0.3, 0.7)}, inferOut("probs", "FP32", []int64{2, 2, 2}, nil))), want: float64(float32(0.6))},
		{name: "second output, raw aligned", in: marshal(t, inferResp([][]byte{rawF32(5, 9), rawF32(probs...)}, other, inferOut("probs", "FP32", []int64{1, 3}, nil))), want: float64(float32(0.7))},
		{name: "first of two with the name", in: marshal(t, inferResp(nil, inferOut("probs", "FP32", []int64{2}, fp32(0.4, 0.6)), inferOut("probs", "FP32", []int64{1}, fp32(0.1)))), want: float64(float32(0.6))},
		{name: "merged contents, unpacked", in: mergedResp, want: float64(float32(0.6))},
		{name: "FP64 contents", in: marshal(t, inferResp(nil, inferOut("probs", "FP64", []int64{1, 3}, &kservepb.InferTensorContents{Fp64Contents: []float64{0.25, 0.5, 0.25}}))), want: 0.5},
		{name: "FP64 raw", in: marshal(t, inferResp([][]byte{rawF64(0.25, 0.5, 0.25, 0.9, 0.05, 0.05)}, inferOut("probs", "FP64", []int64{2, 3}, nil))), want: 0.5},
		// 0x3400 = 0.25, 0x3800 = 0.5, 0x3a00 = 0.75.
		{name: "FP16 raw", in: marshal(t, inferResp([][]byte{rawU16(0x3400, 0x3800, 0x3a00, 0x3400)}, inferOut("probs", "FP16", []int64{2, 2}, nil))), want: 0.5},
		// BF16 0x3f40 = 0.75, 0x3e80 = 0.25.
		{name: "BF16 raw", in: marshal(t, inferResp([][]byte{rawU16(0x3e80, 0x3f40)}, inferOut("probs", "BF16", []int64{1, 2}, nil))), want: 0.75},
		{name: "logits may be negative", in: marshal(t, inferResp([][]byte{rawF32(-3, -1, -2)}, inferOut("probs", "FP32", []int64{1, 3}, nil))), want: -1},

		{name: "missing output", in: good, output: "scores", err: "no output", msg: `"scores"`},
		{name: "no outputs at all", in: nil, err: "no output"},
		{name: "INT32", in: marshal(t, inferResp(nil, inferOut("probs", "INT32", []int64{1, 2}, &kservepb.InferTensorContents{IntContents: []int32{1, 2}}))), err: "other", msg: "INT32"},
		{name: "BYTES", in: marshal(t, inferResp([][]byte{{0, 0, 0, 0}}, inferOut("probs", "BYTES", []int64{1}, nil))), err: "other", msg: "BYTES"},
		{name: "FP16 in contents", in: marshal(t, inferResp(nil, inferOut("probs", "FP16", []int64{1, 2}, nil))), err: "malformed"},
		{name: "FP64 datatype, fp32 contents", in: marshal(t, inferResp(nil, inferOut("probs", "FP64", []int64{1, 3}, fp32(probs...)))), err: "malformed"},
		{name: "count below shape", in: marshal(t, inferResp(nil, inferOut("probs", "FP32", []int64{1, 4}, fp32(probs...)))), err: "malformed", msg: "4 elements, data 3"},
		{name: "count above shape", in: marshal(t, inferResp([][]byte{rawF32(batch...)}, inferOut("probs", "FP32", []int64{1, 3}, nil))), err: "malformed"},
		{name: "raw not whole elements", in: marshal(t, inferResp([][]byte{rawF32(probs...)[:11]}, inferOut("probs", "FP32", []int64{1, 3}, nil))), err: "malformed"},
		{name: "raw missing for the output", in: marshal(t, inferResp([][]byte{rawF32(5, 9)}, other, inferOut("probs", "FP32", []int64{1, 3}, nil))), err: "malformed"},
		{name: "negative dimension", in: marshal(t, inferResp(nil, inferOut("probs", "FP32", []int64{-1, 3}, fp32(probs...)))), err: "malformed"},
		{name: "overflowing shape", in: marshal(t, inferResp(nil, inferOut("probs", "FP32", []int64{1 << 40, 1 << 40, 3}, fp32(probs...)))), err: "malformed"},
		{name: "empty batch", in: marshal(t, inferResp([][]byte{nil}, inferOut("probs", "FP32", []int64{0, 3}, nil))), err: "other", msg: "empty"},
		{name: "no classes", in: marshal(t, inferResp(nil, inferOut("probs", "FP32", []int64{4, 0}, nil))), err: "other", msg: "empty"},
		{name: "scalar", in: marshal(t, inferResp(nil, inferOut("probs", "FP32", nil, fp32(0.9)))), err: "other", msg: "scalar"},
		{name: "NaN", in: marshal(t, inferResp([][]byte{rawF32(0.2, float32(math.NaN()), 0.5)}, inferOut("probs", "FP32", []int64{1, 3}, nil))), err: "other", msg: "NaN"},
		{name: "truncated", in: good[:len(good)-2], err: "malformed"},
		{name: "bad tag", in: []byte{0x02, 0x00}, err: "malformed"},
		{name: "bad output tensor", in: []byte{0x2a, 0x02, 0x0a, 0x05}, err: "malformed"},
		{name: "bad contents", in: []byte{0x2a, 0x10, 0x0a, 0x05, 'p', 'r', 'o', 'b', 's', 0x12, 0x04, 'F', 'P', '3', '2', 0x2a, 0x01, 0x35}, err: "malformed"},
		{name: "packed fp32 not whole", in: []byte{0x2a, 0x15, 0x0a, 0x05, 'p', 'r', 'o', 'b', 's', 0x12, 0x04, 'F', 'P', '3', '2', 0x1a, 0x01, 0x01, 0x2a, 0x03, 0x32, 0x01, 0x00}, err: "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			output := tc.output
			if output == "" {
				output = "probs"
			}
			got, err := ModelInferConfidence(tc.in, output)
			if errKind(err) != tc.err || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("got (%v, %v), want error kind %q containing %q", got, err, tc.err, tc.msg)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			// Whenever proto reads the bytes, the reference rule on the
			// decoded response must agree.
			var m kservepb.ModelInferResponse
			if proto.Unmarshal(tc.in, &m) == nil {
				ref, refErr := refInferConfidence(&m, output)
				if errKind(refErr) != errKind(err) || (err == nil && ref != got) {
					t.Errorf("reference on the decoded response says (%v, %v)", ref, refErr)
				}
			}
		})
	}
}

// tfTensor is a TensorProto of dtype dt and shape dims.
func tfTensor(dt tensorflowpb.DataType, dims ...int64) *tensorflowpb.TensorProto {
	s := &tensorflowpb.TensorShapeProto{}
	for _, d := range dims {
		s.Dim = append(s.Dim, &tensorflowpb.TensorShapeProto_Dim{Size: d})
	}
	return &tensorflowpb.TensorProto{Dtype: dt, TensorShape: s}
}

// predictResp is a PredictResponse with outputs outs and a model_spec, so
// the reader has to skip it.
func predictResp(outs map[string]*tensorflowpb.TensorProto) *tfservingpb.PredictResponse {
	return &tfservingpb.PredictResponse{Outputs: outs, ModelSpec: &tfservingpb.ModelSpec{Name: "edge", SignatureName: "serving_default"}}
}

// unpackedFloatVal is a TensorProto's float_val written one field per
// element, as older encoders and the proto2 default do.
func unpackedFloatVal(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = protowire.AppendTag(b, tensorFloatVal, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(v))
	}
	return b
}

// outputEntry is one serialized entry of the PredictResponse outputs map.
func outputEntry(key string, tensor []byte) []byte {
	e := protowire.AppendTag(nil, mapEntryKey, protowire.BytesType)
	e = protowire.AppendString(e, key)
	e = protowire.AppendTag(e, mapEntryValue, protowire.BytesType)
	e = protowire.AppendBytes(e, tensor)
	b := protowire.AppendTag(nil, predictRespOutputs, protowire.BytesType)
	return protowire.AppendBytes(b, e)
}

func TestPredictConfidence(t *testing.T) {
	F, D := tensorflowpb.DataType_DT_FLOAT, tensorflowpb.DataType_DT_DOUBLE
	with := func(tp *tensorflowpb.TensorProto, set func(*tensorflowpb.TensorProto)) *tensorflowpb.TensorProto {
		set(tp)
		return tp
	}
	one := func(tp *tensorflowpb.TensorProto) []byte {
		return marshal(t, predictResp(map[string]*tensorflowpb.TensorProto{"probs": tp, "logits": tfTensor(F, 1, 2)}))
	}
	packed := one(with(tfTensor(F, 1, 3), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{0.1, 0.7, 0.2} }))
	unpacked := outputEntry("probs", concat(marshal(t, tfTensor(F, 2, 3)), unpackedFloatVal(0.1, 0.8, 0.1, 0.5, 0.3, 0.2)))
	// The value of one entry given twice: the two TensorProtos merge, their
	// float_val concatenating.
	split := protowire.AppendTag(nil, predictRespOutputs, protowire.BytesType)
	entry := protowire.AppendString(protowire.AppendTag(nil, mapEntryKey, protowire.BytesType), "probs")
	entry = protowire.AppendBytes(protowire.AppendTag(entry, mapEntryValue, protowire.BytesType),
		marshal(t, with(tfTensor(F, 1, 3), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{0.2, 0.3} })))
	entry = protowire.AppendBytes(protowire.AppendTag(entry, mapEntryValue, protowire.BytesType), unpackedFloatVal(0.5))
	split = protowire.AppendBytes(split, entry)

	cases := []struct {
		name   string
		in     []byte
		output string
		want   float64
		err    string
		msg    string
	}{
		{name: "float_val packed", in: packed, want: float64(float32(0.7))},
		{name: "float_val unpacked, batched", in: unpacked, want: float64(float32(0.5))},
		{name: "value given twice merges", in: split, want: float64(float32(0.5))},
		{name: "tensor_content", in: one(with(tfTensor(F, 2, 3), func(tp *tensorflowpb.TensorProto) { tp.TensorContent = rawF32(0.1, 0.8, 0.1, 0.5, 0.3, 0.2) })), want: float64(float32(0.5))},
		{name: "tensor_content wins over float_val", in: one(with(tfTensor(F, 1, 2), func(tp *tensorflowpb.TensorProto) {
			tp.TensorContent, tp.FloatVal = rawF32(0.4, 0.6), []float32{0.9, 0.1}
		})), want: float64(float32(0.6))},
		{name: "[C]", in: one(with(tfTensor(F, 3), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{0.1, 0.7, 0.2} })), want: float64(float32(0.7))},
		{name: "double_val", in: one(with(tfTensor(D, 2, 2), func(tp *tensorflowpb.TensorProto) { tp.DoubleVal = []float64{0.9, 0.1, 0.35, 0.65} })), want: 0.65},
		{name: "double tensor_content", in: one(with(tfTensor(D, 1, 2), func(tp *tensorflowpb.TensorProto) { tp.TensorContent = rawF64(0.3, 0.7) })), want: 0.7},
		{name: "half_val", in: one(with(tfTensor(tensorflowpb.DataType_DT_HALF, 1, 3), func(tp *tensorflowpb.TensorProto) { tp.HalfVal = []int32{0x3400, 0x3a00, 0x3400} })), want: 0.75},
		{name: "half tensor_content", in: one(with(tfTensor(tensorflowpb.DataType_DT_HALF, 1, 2), func(tp *tensorflowpb.TensorProto) { tp.TensorContent = rawU16(0x3800, 0x3800) })), want: 0.5},
		{name: "bfloat16 half_val", in: one(with(tfTensor(tensorflowpb.DataType_DT_BFLOAT16, 2), func(tp *tensorflowpb.TensorProto) { tp.HalfVal = []int32{0x3e80, 0x3f40} })), want: 0.75},
		{name: "one value broadcast", in: one(with(tfTensor(F, 4, 10), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{0.125} })), want: 0.125},
		{name: "key given twice, last wins", in: concat(outputEntry("probs", marshal(t, with(tfTensor(F, 2), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{0.5, 0.5} }))), packed), want: float64(float32(0.7))},

		{name: "missing output", in: packed, output: "scores", err: "no output", msg: `"scores"`},
		{name: "empty response", in: nil, err: "no output"},
		{name: "DT_INT32", in: one(with(tfTensor(tensorflowpb.DataType_DT_INT32, 1, 2), func(tp *tensorflowpb.TensorProto) { tp.IntVal = []int32{1, 2} })), err: "other", msg: "dtype 3"},
		{name: "DT_INVALID", in: one(&tensorflowpb.TensorProto{}), err: "other", msg: "dtype 0"},
		{name: "float dtype, double_val", in: one(with(tfTensor(F, 1, 2), func(tp *tensorflowpb.TensorProto) { tp.DoubleVal = []float64{0.3, 0.7} })), err: "malformed"},
		{name: "count mismatch", in: one(with(tfTensor(F, 1, 4), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{0.1, 0.7, 0.2} })), err: "malformed", msg: "4 elements, data 3"},
		{name: "content not whole elements", in: one(with(tfTensor(F, 1, 1), func(tp *tensorflowpb.TensorProto) { tp.TensorContent = []byte{1, 2, 3} })), err: "malformed"},
		{name: "unknown dimension", in: one(with(tfTensor(F, -1, 2), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{0.3, 0.7} })), err: "malformed"},
		{name: "empty", in: one(tfTensor(F, 0, 3)), err: "other", msg: "empty"},
		{name: "no values", in: one(tfTensor(F, 1, 3)), err: "malformed"},
		{name: "scalar", in: one(with(tfTensor(F), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{0.9} })), err: "other", msg: "scalar"},
		{name: "NaN", in: one(with(tfTensor(F, 1, 2), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{float32(math.NaN()), 0.1} })), err: "other", msg: "NaN"},
		{name: "NaN broadcast", in: one(with(tfTensor(F, 1, 2), func(tp *tensorflowpb.TensorProto) { tp.FloatVal = []float32{float32(math.NaN())} })), err: "other", msg: "NaN"},
		{name: "truncated", in: packed[:len(packed)-1], err: "malformed"},
		{name: "bad entry", in: []byte{0x0a, 0x02, 0x0a, 0x05}, err: "malformed"},
		{name: "bad tensor", in: outputEntry("probs", []byte{0x12, 0x05}), err: "malformed"},
		{name: "bad dim", in: outputEntry("probs", []byte{0x12, 0x02, 0x12, 0x05}), err: "malformed"},
		{name: "bad half_val varint", in: outputEntry("probs", []byte{0x08, 0x13, 0x6a, 0x01, 0x80}), err: "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			output := tc.output
			if output == "" {
				output = "probs"
			}
			got, err := PredictConfidence(tc.in, output)
			if errKind(err) != tc.err || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("got (%v, %v), want error kind %q containing %q", got, err, tc.err, tc.msg)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			var m tfservingpb.PredictResponse
			if proto.Unmarshal(tc.in, &m) == nil {
				ref, refErr := refPredictConfidence(&m, output)
				if errKind(refErr) != errKind(err) || (err == nil && ref != got) {
					t.Errorf("reference on the decoded response says (%v, %v)", ref, refErr)
				}
			}
		})
	}
}

func TestHalf(t *testing.T) {
	cases := []struct {
		bits uint16
		want float64
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x3555, 0.333251953125},
		{0x7bff, 65504}, {0x0001, math.Ldexp(1, -24)}, {0x03ff, math.Ldexp(1023, -24)},
		{0x7c00, math.Inf(1)}, {0xfc00, math.Inf(-1)},
	}
	for _, c := range cases {
		if got := f16(c.bits); got != c.want {
			t.Errorf("f16(%#04x) = %v, want %v", c.bits, got, c.want)
		}
	}
	if got := f16(0x7e00); !math.IsNaN(got) {
		t.Errorf("f16(0x7e00) = %v, want NaN", got)
	}
	if got := half(0x3f80, kindBF16); got != 1 {
		t.Errorf("bf16(0x3f80) = %v, want 1", got)
	}
}
