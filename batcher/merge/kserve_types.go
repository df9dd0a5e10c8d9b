package merge

import "github.com/infergate/infergate/proto/kservepb"

// kField names one typed field of kservepb.InferTensorContents.
type kField uint8

const (
	kNone    kField = iota // no field holds data
	kBool                  // bool_contents
	kInt                   // int_contents: INT8, INT16, INT32
	kInt64                 // int64_contents
	kUint                  // uint_contents: UINT8, UINT16, UINT32
	kUint64                // uint64_contents
	kFP32                  // fp32_contents
	kFP64                  // fp64_contents
	kBytes                 // bytes_contents
	kMulti                 // more than one field holds data
	kRawOnly               // the datatype has no typed field (FP16, BF16)
)

// kType describes a KServe datatype: its element size in raw form (0 for
// BYTES, whose elements are length-prefixed) and its typed field.
type kType struct {
	size  int
	field kField
}

// kserveType looks up a datatype name; the switch is cheaper than a map on
// the per-input path.
func kserveType(dt string) (kType, bool) {
	switch dt {
	case "BOOL":
		return kType{1, kBool}, true
	case "UINT8":
		return kType{1, kUint}, true
	case "UINT16":
		return kType{2, kUint}, true
	case "UINT32":
		return kType{4, kUint}, true
	case "UINT64":
		return kType{8, kUint64}, true
	case "INT8":
		return kType{1, kInt}, true
	case "INT16":
		return kType{2, kInt}, true
	case "INT32":
		return kType{4, kInt}, true
	case "INT64":
		return kType{8, kInt64}, true
	case "FP16", "BF16":
		return kType{2, kRawOnly}, true
	case "FP32":
		return kType{4, kFP32}, true
	case "FP64":
		return kType{8, kFP64}, true
	case "BYTES":
		return kType{0, kBytes}, true
	}
	return kType{}, false
}

// kPopulated reports which single field of c holds data: kNone, one field,
// or kMulti.
func kPopulated(c *kservepb.InferTensorContents) kField {
	if c == nil {
		return kNone
	}
	f := kNone
	note := func(n int, g kField) {
		if n == 0 {
			return
		}
		if f == kNone {
			f = g
		} else {
			f = kMulti
		}
	}
	note(len(c.BoolContents), kBool)
	note(len(c.IntContents), kInt)
	note(len(c.Int64Contents), kInt64)
	note(len(c.UintContents), kUint)
	note(len(c.Uint64Contents), kUint64)
	note(len(c.Fp32Contents), kFP32)
	note(len(c.Fp64Contents), kFP64)
	note(len(c.BytesContents), kBytes)
	return f
}

// kLen returns the number of elements in field f of c.
func kLen(c *kservepb.InferTensorContents, f kField) int {
	if c == nil {
		return 0
	}
	switch f {
	case kBool:
		return len(c.BoolContents)
	case kInt:
		return len(c.IntContents)
	case kInt64:
		return len(c.Int64Contents)
	case kUint:
		return len(c.UintContents)
	case kUint64:
		return len(c.Uint64Contents)
	case kFP32:
		return len(c.Fp32Contents)
	case kFP64:
		return len(c.Fp64Contents)
	case kBytes:
		return len(c.BytesContents)
	}
	return 0
}

// kConcat concatenates field f of every part into a new contents message.
func kConcat(parts []*kservepb.InferTensorContents, f kField) *kservepb.InferTensorContents {
	out := new(kservepb.InferTensorContents)
	switch f {
	case kBool:
		out.BoolContents = concatInto(kCollect(parts, (*kservepb.InferTensorContents).GetBoolContents))
	case kInt:
		out.IntContents = concatInto(kCollect(parts, (*kservepb.InferTensorContents).GetIntContents))
	case kInt64:
		out.Int64Contents = concatInto(kCollect(parts, (*kservepb.InferTensorContents).GetInt64Contents))
	case kUint:
		out.UintContents = concatInto(kCollect(parts, (*kservepb.InferTensorContents).GetUintContents))
	case kUint64:
		out.Uint64Contents = concatInto(kCollect(parts, (*kservepb.InferTensorContents).GetUint64Contents))
	case kFP32:
		out.Fp32Contents = concatInto(kCollect(parts, (*kservepb.InferTensorContents).GetFp32Contents))
	case kFP64:
		out.Fp64Contents = concatInto(kCollect(parts, (*kservepb.InferTensorContents).GetFp64Contents))
	case kBytes:
		out.BytesContents = concatInto(kCollect(parts, (*kservepb.InferTensorContents).GetBytesContents))
	}
	return out
}

// kCollect reads one field from each part (nil-safe getters).
func kCollect[T any](parts []*kservepb.InferTensorContents, get func(*kservepb.InferTensorContents) []T) [][]T {
	out := make([][]T, len(parts))
	for i, p := range parts {
		out[i] = get(p)
	}
	return out
}

// kSlice returns elements [lo, hi) of field f of c as a new contents message
// sharing c's backing arrays (it is marshalled before c is dropped).
func kSlice(c *kservepb.InferTensorContents, f kField, lo, hi int) *kservepb.InferTensorContents {
	out := new(kservepb.InferTensorContents)
	if lo == hi {
		return out
	}
	switch f {
	case kBool:
		out.BoolContents = c.BoolContents[lo:hi]
	case kInt:
		out.IntContents = c.IntContents[lo:hi]
	case kInt64:
		out.Int64Contents = c.Int64Contents[lo:hi]
	case kUint:
		out.UintContents = c.UintContents[lo:hi]
	case kUint64:
		out.Uint64Contents = c.Uint64Contents[lo:hi]
	case kFP32:
		out.Fp32Contents = c.Fp32Contents[lo:hi]
	case kFP64:
		out.Fp64Contents = c.Fp64Contents[lo:hi]
	case kBytes:
		out.BytesContents = c.BytesContents[lo:hi]
	}
	return out
}
