package merge

import "github.com/infergate/infergate/proto/tensorflowpb"

// tField names one typed *_val field of tensorflowpb.TensorProto.
type tField uint8

const (
	tNone    tField = iota // no field holds data
	tHalf                  // half_val: DT_HALF, DT_BFLOAT16 (16 bits in an int32)
	tFloat                 // float_val
	tDouble                // double_val
	tInt                   // int_val: DT_INT32, DT_INT16, DT_UINT16, DT_INT8, DT_UINT8
	tString                // string_val
	tInt64                 // int64_val
	tBool                  // bool_val
	tUint32                // uint32_val
	tUint64                // uint64_val
	tComplex               // scomplex_val or dcomplex_val: never batched
	tMulti                 // more than one field holds data
)

// tType describes a batchable TF dtype: its element size in tensor_content
// (0 for DT_STRING, which has no plain tensor_content form) and its field.
type tType struct {
	size  int
	field tField
}

// tfType looks up a dtype; false means the dtype is not batchable here.
func tfType(dt tensorflowpb.DataType) (tType, bool) {
	switch dt {
	case tensorflowpb.DataType_DT_FLOAT:
		return tType{4, tFloat}, true
	case tensorflowpb.DataType_DT_DOUBLE:
		return tType{8, tDouble}, true
	case tensorflowpb.DataType_DT_INT32:
		return tType{4, tInt}, true
	case tensorflowpb.DataType_DT_UINT8, tensorflowpb.DataType_DT_INT8:
		return tType{1, tInt}, true
	case tensorflowpb.DataType_DT_INT16, tensorflowpb.DataType_DT_UINT16:
		return tType{2, tInt}, true
	case tensorflowpb.DataType_DT_INT64:
		return tType{8, tInt64}, true
	case tensorflowpb.DataType_DT_BOOL:
		return tType{1, tBool}, true
	case tensorflowpb.DataType_DT_HALF, tensorflowpb.DataType_DT_BFLOAT16:
		return tType{2, tHalf}, true
	case tensorflowpb.DataType_DT_UINT32:
		return tType{4, tUint32}, true
	case tensorflowpb.DataType_DT_UINT64:
		return tType{8, tUint64}, true
	case tensorflowpb.DataType_DT_STRING:
		return tType{0, tString}, true
	}
	return tType{}, false
}

// tPopulated reports which single *_val field of t holds data: tNone, one
// field, or tMulti.
func tPopulated(t *tensorflowpb.TensorProto) tField {
	f := tNone
	note := func(n int, g tField) {
		if n == 0 {
			return
		}
		if f == tNone {
			f = g
		} else {
			f = tMulti
		}
	}
	note(len(t.HalfVal), tHalf)
	note(len(t.FloatVal), tFloat)
	note(len(t.DoubleVal), tDouble)
	note(len(t.IntVal), tInt)
	note(len(t.StringVal), tString)
	note(len(t.ScomplexVal), tComplex)
	note(len(t.Int64Val), tInt64)
	note(len(t.BoolVal), tBool)
	note(len(t.DcomplexVal), tComplex)
	note(len(t.Uint32Val), tUint32)
	note(len(t.Uint64Val), tUint64)
	return f
}

// tLen returns the number of values in field f of t.
func tLen(t *tensorflowpb.TensorProto, f tField) int {
	switch f {
	case tHalf:
		return len(t.HalfVal)
	case tFloat:
		return len(t.FloatVal)
	case tDouble:
		return len(t.DoubleVal)
	case tInt:
		return len(t.IntVal)
	case tString:
		return len(t.StringVal)
	case tInt64:
		return len(t.Int64Val)
	case tBool:
		return len(t.BoolVal)
	case tUint32:
		return len(t.Uint32Val)
	case tUint64:
		return len(t.Uint64Val)
	}
	return 0
}

// tCollect reads one field from each part.
func tCollect[T any](parts []*tensorflowpb.TensorProto, get func(*tensorflowpb.TensorProto) []T) [][]T {
	out := make([][]T, len(parts))
	for i, p := range parts {
		out[i] = get(p)
	}
	return out
}

// tConcat sets field f of dst to the concatenation of field f of parts.
func tConcat(dst *tensorflowpb.TensorProto, parts []*tensorflowpb.TensorProto, f tField) {
	switch f {
	case tHalf:
		dst.HalfVal = concatInto(tCollect(parts, (*tensorflowpb.TensorProto).GetHalfVal))
	case tFloat:
		dst.FloatVal = concatInto(tCollect(parts, (*tensorflowpb.TensorProto).GetFloatVal))
	case tDouble:
		dst.DoubleVal = concatInto(tCollect(parts, (*tensorflowpb.TensorProto).GetDoubleVal))
	case tInt:
		dst.IntVal = concatInto(tCollect(parts, (*tensorflowpb.TensorProto).GetIntVal))
	case tString:
		dst.StringVal = concatInto(tCollect(parts, (*tensorflowpb.TensorProto).GetStringVal))
	case tInt64:
		dst.Int64Val = concatInto(tCollect(parts, (*tensorflowpb.TensorProto).GetInt64Val))
	case tBool:
		dst.BoolVal = concatInto(tCollect(parts, (*tensorflowpb.TensorProto).GetBoolVal))
	case tUint32:
		dst.Uint32Val = concatInto(tCollect(parts, (*tensorflowpb.TensorProto).GetUint32Val))
	case tUint64:
		dst.Uint64Val = concatInto(tCollect(parts, (*tensorflowpb.TensorProto).GetUint64Val))
	}
}

// tSlice sets field f of dst to values [lo, hi) of src's field f, sharing
// src's backing array (dst is marshalled before src is dropped).
func tSlice(dst, src *tensorflowpb.TensorProto, f tField, lo, hi int) {
	if lo == hi {
		return
	}
	switch f {
	case tHalf:
		dst.HalfVal = src.HalfVal[lo:hi]
	case tFloat:
		dst.FloatVal = src.FloatVal[lo:hi]
	case tDouble:
		dst.DoubleVal = src.DoubleVal[lo:hi]
	case tInt:
		dst.IntVal = src.IntVal[lo:hi]
	case tString:
		dst.StringVal = src.StringVal[lo:hi]
	case tInt64:
		dst.Int64Val = src.Int64Val[lo:hi]
	case tBool:
		dst.BoolVal = src.BoolVal[lo:hi]
	case tUint32:
		dst.Uint32Val = src.Uint32Val[lo:hi]
	case tUint64:
		dst.Uint64Val = src.Uint64Val[lo:hi]
	}
}
