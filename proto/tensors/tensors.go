// Package tensors reads the outputs of an inference answer as numbers,
// for comparing two answers (a release's shadow copy against the client's)
// off the call path: it unmarshals, which the call path never does.
package tensors

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// Tensor is one output of an answer, its values as numbers.
type Tensor struct {
	Name   string
	Shape  []int64
	Values []float64
}

// Decode reads an answer's outputs: a KServe v2 ModelInferResponse
// (raw_output_contents, or typed contents) or, when tfServing, a
// TF-Serving PredictResponse. Raw bytes of a datatype it does not know
// as numbers (BYTES) are read byte by byte.
func Decode(tfServing bool, b []byte) ([]Tensor, error) {
	if tfServing {
		var m tfservingpb.PredictResponse
		if err := proto.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		out := make([]Tensor, 0, len(m.Outputs))
		for name, tp := range m.Outputs {
			t := Tensor{Name: name}
			for _, d := range tp.GetTensorShape().GetDim() {
				t.Shape = append(t.Shape, d.Size)
			}
			t.Values = tfValues(tp)
			out = append(out, t)
		}
		return out, nil
	}
	var m kservepb.ModelInferResponse
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := make([]Tensor, len(m.Outputs))
	for i, o := range m.Outputs {
		out[i] = Tensor{Name: o.Name, Shape: o.Shape}
		if i < len(m.RawOutputContents) {
			out[i].Values = rawValues(o.Datatype, m.RawOutputContents[i])
		} else if ct := o.Contents; ct != nil {
			v := appendNums(appendNums(appendNums(nil, ct.Fp32Contents), ct.Fp64Contents), ct.IntContents)
			out[i].Values = appendNums(appendNums(appendNums(v, ct.Int64Contents), ct.UintContents), ct.Uint64Contents)
		}
	}
	return out, nil
}

// tfValues is a TensorProto's values as numbers.
func tfValues(tp *tensorflowpb.TensorProto) []float64 {
	if len(tp.TensorContent) > 0 {
		return rawValues(tfDatatype[tp.Dtype], tp.TensorContent)
	}
	v := appendNums(appendNums(appendNums(appendNums(nil, tp.FloatVal), tp.DoubleVal), tp.IntVal), tp.Int64Val)
	for _, h := range tp.HalfVal {
		v = append(v, halfFloat(uint16(h)))
	}
	return v
}

// tfDatatype names TF-Serving's dtypes as KServe's datatypes, for raw
// tensor_content.
var tfDatatype = map[tensorflowpb.DataType]string{
	tensorflowpb.DataType_DT_FLOAT: "FP32", tensorflowpb.DataType_DT_DOUBLE: "FP64",
	tensorflowpb.DataType_DT_HALF: "FP16", tensorflowpb.DataType_DT_INT32: "INT32",
	tensorflowpb.DataType_DT_INT64: "INT64", tensorflowpb.DataType_DT_INT8: "INT8",
	tensorflowpb.DataType_DT_UINT8: "UINT8", tensorflowpb.DataType_DT_INT16: "INT16",
}

// number is an element type of typed tensor contents.
type number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint32 | ~uint64
}

// appendNums appends xs as float64s. (A tensor fills one of its typed
// fields; the others are empty.)
func appendNums[T number](v []float64, xs []T) []float64 {
	for _, x := range xs {
		v = append(v, float64(x))
	}
	return v
}

// rawSize is the bytes of an element of a KServe datatype (1 for the
// others).
var rawSize = map[string]int{"FP64": 8, "INT64": 8, "UINT64": 8, "FP32": 4, "INT32": 4, "UINT32": 4,
	"FP16": 2, "BF16": 2, "INT16": 2, "UINT16": 2}

// rawValues decodes little-endian raw tensor bytes of a KServe datatype;
// an unknown datatype (BYTES) is compared byte by byte.
func rawValues(dt string, b []byte) []float64 {
	le := binary.LittleEndian
	size := rawSize[dt]
	if size == 0 {
		size = 1
	}
	v := make([]float64, 0, len(b)/size)
	for ; len(b) >= size; b = b[size:] {
		var x float64
		switch dt {
		case "FP64":
			x = math.Float64frombits(le.Uint64(b))
		case "INT64":
			x = float64(int64(le.Uint64(b)))
		case "UINT64":
			x = float64(le.Uint64(b))
		case "FP32":
			x = float64(math.Float32frombits(le.Uint32(b)))
		case "INT32":
			x = float64(int32(le.Uint32(b)))
		case "UINT32":
			x = float64(le.Uint32(b))
		case "FP16":
			x = halfFloat(le.Uint16(b))
		case "BF16":
			x = float64(math.Float32frombits(uint32(le.Uint16(b)) << 16))
		case "INT16":
			x = float64(int16(le.Uint16(b)))
		case "UINT16":
			x = float64(le.Uint16(b))
		case "INT8":
			x = float64(int8(b[0]))
		default:
			x = float64(b[0])
		}
		v = append(v, x)
	}
	return v
}

// halfFloat is an IEEE 754 half-precision value.
func halfFloat(h uint16) float64 {
	sign, exp, frac := float64(1), int(h>>10)&0x1f, float64(h&0x3ff)
	if h&0x8000 != 0 {
		sign = -1
	}
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}
