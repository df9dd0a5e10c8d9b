package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrNoOutput is wrapped, with the name asked for, by the error
// ModelInferConfidence and PredictConfidence return when the response has
// no output of that name: a model that answers without the output is
// misconfigured, not low-confidence, and a caller may route the two apart.
var ErrNoOutput = errors.New("no such output")

// Field numbers of the response messages the confidence readers read.
const (
	// inference.ModelInferResponse.
	inferRespOutputs protowire.Number = 5 // repeated InferOutputTensor
	inferRespRaw     protowire.Number = 6 // repeated bytes raw_output_contents

	// ModelInferResponse.InferOutputTensor.
	outName     protowire.Number = 1
	outDatatype protowire.Number = 2
	outShape    protowire.Number = 3 // repeated int64
	outContents protowire.Number = 5 // InferTensorContents

	// inference.InferTensorContents.
	contentsFP32 protowire.Number = 6
	contentsFP64 protowire.Number = 7

	// tensorflow.serving.PredictResponse: outputs is a map, on the wire a
	// repeated entry message {key=1, value=2}.
	predictRespOutputs protowire.Number = 1
	mapEntryKey        protowire.Number = 1
	mapEntryValue      protowire.Number = 2

	// tensorflow.TensorProto.
	tensorDtype     protowire.Number = 1
	tensorShape     protowire.Number = 2 // TensorShapeProto
	tensorContent   protowire.Number = 4
	tensorFloatVal  protowire.Number = 5
	tensorDoubleVal protowire.Number = 6
	tensorHalfVal   protowire.Number = 13 // int32 per element, 16 bits used

	// tensorflow.TensorShapeProto and its Dim.
	shapeDim protowire.Number = 2
	dimSize  protowire.Number = 1

	// tensorflow.DataType values.
	dtFloat    = 1
	dtDouble   = 2
	dtBfloat16 = 14
	dtHalf     = 19
)

// elemKind is the floating-point type of a tensor's elements.
type elemKind uint8

const (
	kindNone elemKind = iota
	kindF32
	kindF64
	kindF16
	kindBF16
)

// size is the bytes of one element in raw little-endian data.
func (k elemKind) size() int {
	switch k {
	case kindF32:
		return 4
	case kindF64:
		return 8
	case kindF16, kindBF16:
		return 2
	}
	return 0
}

// encoding tells how the elements of a run of data are written: fixed-size
// little-endian (raw contents, packed float and double fields), or one
// varint each (TensorProto.half_val, an int32 field carrying 16 bits).
type encoding uint8

const (
	encFixed encoding = iota
	encVarint
)

// runLen returns how many elements of kind k a run of data encoded as enc
// holds, or an error for a run that is not a whole number of them.
func runLen(run []byte, k elemKind, enc encoding) (int64, error) {
	if enc == encFixed {
		if len(run)%k.size() != 0 {
			return 0, fmt.Errorf("wire: %d bytes of data are not whole %d-byte elements: %w", len(run), k.size(), ErrMalformed)
		}
		return int64(len(run) / k.size()), nil
	}
	var n int64
	for len(run) > 0 {
		_, m := protowire.ConsumeVarint(run)
		if m < 0 {
			return 0, malformed("packed varint", m)
		}
		run = run[m:]
		n++
	}
	return n, nil
}

// f16 converts IEEE 754 half-precision bits.
func f16(h uint16) float64 {
	exp, frac := int(h>>10&0x1f), float64(h&0x3ff)
	var v float64
	switch exp {
	case 0: // zero or subnormal
		v = math.Ldexp(frac, -24)
	case 0x1f:
		if frac == 0 {
			v = math.Inf(1)
		} else {
			v = math.NaN()
		}
	default:
		v = math.Ldexp(frac+0x400, exp-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// half converts the 16 bits of an FP16 or BF16 element.
func half(h uint16, k elemKind) float64 {
	if k == kindBF16 {
		return float64(math.Float32frombits(uint32(h) << 16))
	}
	return f16(h)
}

// shapeCount follows a tensor's dimensions as they are read, keeping only
// what the confidence needs: the rank, the last dimension (the class axis)
// and the element count, without holding the dimensions.
type shapeCount struct {
	rank  int
	last  int64
	count int64 // product of the dimensions while !over; starts at 1
	zero  bool  // a dimension is 0
	over  bool  // the product overflowed: it matches no real data
}

func newShapeCount() shapeCount { return shapeCount{count: 1} }

// dim adds the next dimension. A negative one (-1, "unknown") has no place
// in a response.
func (s *shapeCount) dim(d int64) error {
	if d < 0 {
		return fmt.Errorf("wire: tensor dimension %d: %w", d, ErrMalformed)
	}
	s.rank++
	s.last = d
	switch {
	case d == 0:
		s.zero = true
	case s.over:
	case s.count > math.MaxInt64/d:
		s.over = true
	default:
		s.count *= d
	}
	return nil
}

// holds reports whether the shape holds exactly n elements.
func (s *shapeCount) holds(n int64) bool {
	if s.zero {
		return n == 0
	}
	return !s.over && s.count == n
}

// rowMaxMin folds a tensor's elements, row after row, into the minimum over
// rows of each row's maximum: the confidence of the least confident row,
// as a batched answer is only as trustworthy as its weakest row.
type rowMaxMin struct {
	cols   int64 // length of the class axis, > 0
	col    int64 // index of the next element in its row
	rowMax float64
	result float64 // +Inf until a row ends
	nan    bool
}

func newRowMaxMin(cols int64) rowMaxMin { return rowMaxMin{cols: cols, result: math.Inf(1)} }

func (a *rowMaxMin) add(v float64) {
	if v != v {
		a.nan = true
	}
	if a.col == 0 {
		a.rowMax = math.Inf(-1)
	}
	if v > a.rowMax {
		a.rowMax = v
	}
	a.col++
	if a.col == a.cols {
		a.result = min(a.result, a.rowMax)
		a.col = 0
	}
}

// addRun adds every element of a run that runLen accepted. Fixed-size
// elements are folded a row segment at a time in a loop per kind, which is
// what keeps a 1000-class row near a nanosecond per element.
func (a *rowMaxMin) addRun(run []byte, k elemKind, enc encoding) {
	if enc == encVarint {
		for len(run) > 0 {
			v, m := protowire.ConsumeVarint(run)
			a.add(half(uint16(v), k))
			run = run[m:]
		}
		return
	}
	size := k.size()
	for len(run) >= size {
		// The next n elements all lie in the current row.
		n := int(min(int64(len(run)/size), a.cols-a.col))
		seg := run[:n*size]
		run = run[n*size:]
		m := a.rowMax
		if a.col == 0 {
			m = math.Inf(-1)
		}
		nan := false
		switch k {
		case kindF32:
			// float32 compares exactly as its float64 conversion does.
			m32 := float32(math.Inf(-1))
			for i := 0; i+4 <= len(seg); i += 4 {
				v := math.Float32frombits(binary.LittleEndian.Uint32(seg[i:]))
				if v > m32 {
					m32 = v
				}
				if v != v {
					nan = true
				}
			}
			m = max(m, float64(m32))
		case kindF64:
			for i := 0; i+8 <= len(seg); i += 8 {
				v := math.Float64frombits(binary.LittleEndian.Uint64(seg[i:]))
				if v > m {
					m = v
				}
				if v != v {
					nan = true
				}
			}
		default:
			for i := 0; i+2 <= len(seg); i += 2 {
				v := half(binary.LittleEndian.Uint16(seg[i:]), k)
				if v > m {
					m = v
				}
				if v != v {
					nan = true
				}
			}
		}
		a.rowMax, a.nan = m, a.nan || nan
		a.col += int64(n)
		if a.col == a.cols {
			a.result = min(a.result, m)
			a.col = 0
		}
	}
}

// checkTensor returns the error, if any, for a tensor of shape s whose data
// holds n elements.
func checkTensor(output string, s *shapeCount, n int64) error {
	if !s.holds(n) {
		if s.over {
			return fmt.Errorf("wire: output %q: shape overflows int64, data holds %d elements: %w", output, n, ErrMalformed)
		}
		want := s.count
		if s.zero {
			want = 0
		}
		return fmt.Errorf("wire: output %q: shape holds %d elements, data %d: %w", output, want, n, ErrMalformed)
	}
	if n == 0 {
		return fmt.Errorf("wire: output %q is empty", output)
	}
	if s.rank == 0 {
		return fmt.Errorf("wire: output %q is a scalar: no class axis", output)
	}
	return nil
}

// confidenceResult is what a fold over all rows gives the caller.
func confidenceResult(output string, a *rowMaxMin) (float64, error) {
	if a.nan {
		// A NaN compares false with any threshold, so returning it would
		// read as confident to a caller testing conf < threshold.
		return 0, fmt.Errorf("wire: output %q holds NaN", output)
	}
	return a.result, nil
}

// eachRun calls fn with every run of the repeated scalar field num in the
// message msg: the payload of a packed occurrence, or the value of an
// unpacked one (wire type unpacked). Occurrences of any other wire type are
// unknown fields to proto, skipped.
func eachRun(msg []byte, num protowire.Number, unpacked protowire.Type, fn func(run []byte) error) error {
	for len(msg) > 0 {
		n2, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return malformed("tensor data tag", n)
		}
		msg = msg[n:]
		m := protowire.ConsumeFieldValue(n2, typ, msg)
		if m < 0 {
			return malformed("tensor data field", m)
		}
		if n2 == num {
			switch typ {
			case protowire.BytesType:
				v, _ := protowire.ConsumeBytes(msg)
				if err := fn(v); err != nil {
					return err
				}
			case unpacked:
				if err := fn(msg[:m]); err != nil {
					return err
				}
			}
		}
		msg = msg[m:]
	}
	return nil
}

// ModelInferConfidence returns the confidence of a serialized KServe v2
// ModelInferResponse in its output tensor named output, read without
// unmarshalling the response: the last dimension of the tensor's shape is
// the class axis, each row's confidence is its largest value, and the
// confidence is the smallest of those over all rows (shape [C], [1,C],
// [N,C] or more leading dimensions), as a batched answer is only as good as
// its weakest row. The values are taken as they are, so the output should be
// probabilities (after softmax), not logits.
//
// The data is raw_output_contents[i] for the i-th output when the response
// has raw contents at all (Triton always answers so), else the tensor's
// contents. FP32 and FP64 are read from either, FP16 and BF16 from raw
// contents only, as the protocol carries them; any other datatype is an
// error naming it. A response without the output gives an error wrapping
// ErrNoOutput; malformed bytes, or data whose element count differs from
// the shape, one wrapping ErrMalformed. An empty tensor, a scalar, or a
// NaN value are errors too. If several outputs share the name, the first
// one counts.
func ModelInferConfidence(resp []byte, output string) (float64, error) {
	var tensor []byte
	found := false
	index, outputs, raws := 0, 0, 0
	for b := resp; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, malformed("ModelInferResponse tag", n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, malformed("ModelInferResponse field", m)
		}
		if typ == protowire.BytesType {
			switch num {
			case inferRespOutputs:
				if !found {
					v, _ := protowire.ConsumeBytes(b)
					name, err := outputName(v)
					if err != nil {
						return 0, err
					}
					if string(name) == output {
						tensor, found, index = v, true, outputs
					}
				}
				outputs++
			case inferRespRaw:
				raws++
			}
		}
		b = b[m:]
	}
	if !found {
		return 0, fmt.Errorf("wire: output %q: %w", output, ErrNoOutput)
	}
	var raw []byte
	if raws > 0 {
		if index >= raws {
			return 0, fmt.Errorf("wire: output %q is output %d, raw_output_contents has %d entries: %w", output, index, raws, ErrMalformed)
		}
		raw = nthBytes(resp, inferRespRaw, index)
	}
	return inferTensorConfidence(tensor, raw, raws > 0, output)
}

// outputName returns the name of a serialized InferOutputTensor, the last
// occurrence winning. It is bytes, not a string, so that comparing it with
// the name asked for allocates nothing.
func outputName(t []byte) ([]byte, error) {
	var name []byte
	for len(t) > 0 {
		num, typ, n := protowire.ConsumeTag(t)
		if n < 0 {
			return nil, malformed("InferOutputTensor tag", n)
		}
		t = t[n:]
		m := protowire.ConsumeFieldValue(num, typ, t)
		if m < 0 {
			return nil, malformed("InferOutputTensor field", m)
		}
		if num == outName && typ == protowire.BytesType {
			name, _ = protowire.ConsumeBytes(t)
		}
		t = t[m:]
	}
	return name, nil
}

// nthBytes returns the value of the i-th occurrence of the bytes field num
// in msg, which the caller has validated and counted.
func nthBytes(msg []byte, num protowire.Number, i int) []byte {
	for len(msg) > 0 {
		n2, typ, n := protowire.ConsumeTag(msg)
		msg = msg[n:]
		m := protowire.ConsumeFieldValue(n2, typ, msg)
		if n2 == num && typ == protowire.BytesType {
			if i == 0 {
				v, _ := protowire.ConsumeBytes(msg)
				return v
			}
			i--
		}
		msg = msg[m:]
	}
	return nil
}

// inferTensorConfidence is ModelInferConfidence for the serialized
// InferOutputTensor t (validated by outputName), whose data is raw when
// hasRaw.
func inferTensorConfidence(t, raw []byte, hasRaw bool, output string) (float64, error) {
	var datatype []byte
	for p := t; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		p = p[n:]
		m := protowire.ConsumeFieldValue(num, typ, p)
		if num == outDatatype && typ == protowire.BytesType {
			datatype, _ = protowire.ConsumeBytes(p)
		}
		p = p[m:]
	}
	shape := newShapeCount()
	err := eachRun(t, outShape, protowire.VarintType, func(run []byte) error {
		for len(run) > 0 {
			v, m := protowire.ConsumeVarint(run)
			if m < 0 {
				return malformed("InferOutputTensor shape", m)
			}
			if err := shape.dim(int64(v)); err != nil {
				return err
			}
			run = run[m:]
		}
		return nil
	})
	if err != nil {
		return 0, err
	}

	var kind elemKind
	var field protowire.Number // of InferTensorContents; 0: raw only
	unpacked := protowire.Fixed32Type
	switch string(datatype) {
	case "FP32":
		kind, field = kindF32, contentsFP32
	case "FP64":
		kind, field, unpacked = kindF64, contentsFP64, protowire.Fixed64Type
	case "FP16":
		kind = kindF16
	case "BF16":
		kind = kindBF16
	default:
		return 0, fmt.Errorf("wire: output %q has datatype %q; confidence reads FP32, FP64, FP16 or BF16", output, datatype)
	}

	if hasRaw {
		n, err := runLen(raw, kind, encFixed)
		if err != nil {
			return 0, err
		}
		if err := checkTensor(output, &shape, n); err != nil {
			return 0, err
		}
		a := newRowMaxMin(shape.last)
		a.addRun(raw, kind, encFixed)
		return confidenceResult(output, &a)
	}

	// contents occurrences merge, so their repeated fields concatenate.
	eachContentsRun := func(fn func(run []byte) error) error {
		if field == 0 {
			return nil
		}
		return eachRun(t, outContents, protowire.BytesType, func(contents []byte) error {
			return eachRun(contents, field, unpacked, fn)
		})
	}
	var n int64
	err = eachContentsRun(func(run []byte) error {
		k, err := runLen(run, kind, encFixed)
		n += k
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := checkTensor(output, &shape, n); err != nil {
		return 0, err
	}
	a := newRowMaxMin(shape.last)
	_ = eachContentsRun(func(run []byte) error {
		a.addRun(run, kind, encFixed)
		return nil
	})
	return confidenceResult(output, &a)
}

// PredictConfidence is ModelInferConfidence for a serialized TF-Serving
// PredictResponse: output is a key of its outputs map (field 1), the last
// entry with that key winning as in a map, and the value is a
// tensorflow.TensorProto. DT_FLOAT, DT_DOUBLE, DT_HALF and DT_BFLOAT16 are
// read from tensor_content when it is set, else from float_val, double_val
// or half_val (packed or not); a single *_val element stands for the whole
// shape, as TensorFlow broadcasts it. Errors are as for
// ModelInferConfidence: ErrNoOutput, ErrMalformed (a data count that is
// neither the shape's element count nor a broadcast 1), an empty tensor, a
// scalar, a NaN, or another dtype.
func PredictConfidence(resp []byte, output string) (float64, error) {
	var entry []byte
	found := false
	for b := resp; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, malformed("PredictResponse tag", n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, malformed("PredictResponse field", m)
		}
		if num == predictRespOutputs && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			key, err := entryKey(v)
			if err != nil {
				return 0, err
			}
			if string(key) == output {
				entry, found = v, true
			}
		}
		b = b[m:]
	}
	if !found {
		return 0, fmt.Errorf("wire: output %q: %w", output, ErrNoOutput)
	}
	return tensorProtoConfidence(entry, output)
}

// entryKey returns the string key of a serialized map entry, the last
// occurrence winning, as bytes for the reason outputName gives.
func entryKey(e []byte) ([]byte, error) {
	var key []byte
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		if n < 0 {
			return nil, malformed("map entry tag", n)
		}
		e = e[n:]
		m := protowire.ConsumeFieldValue(num, typ, e)
		if m < 0 {
			return nil, malformed("map entry field", m)
		}
		if num == mapEntryKey && typ == protowire.BytesType {
			key, _ = protowire.ConsumeBytes(e)
		}
		e = e[m:]
	}
	return key, nil
}

// tensorProtoRead is what the first pass over a TensorProto found.
type tensorProtoRead struct {
	dtype   uint64
	shape   shapeCount
	content []byte
	// Elements in float_val, double_val and half_val.
	floats, doubles, halves int64
}

// scan merges one serialized TensorProto occurrence into r.
func (r *tensorProtoRead) scan(t []byte) error {
	for p := t; len(p) > 0; {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return malformed("TensorProto tag", n)
		}
		p = p[n:]
		m := protowire.ConsumeFieldValue(num, typ, p)
		if m < 0 {
			return malformed("TensorProto field", m)
		}
		switch {
		case num == tensorDtype && typ == protowire.VarintType:
			r.dtype, _ = protowire.ConsumeVarint(p)
		case num == tensorContent && typ == protowire.BytesType:
			r.content, _ = protowire.ConsumeBytes(p)
		case num == tensorShape && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(p)
			if err := eachRun(v, shapeDim, protowire.BytesType, r.dim); err != nil {
				return err
			}
		}
		p = p[m:]
	}
	for _, f := range []struct {
		num      protowire.Number
		unpacked protowire.Type
		kind     elemKind
		enc      encoding
		n        *int64
	}{
		{tensorFloatVal, protowire.Fixed32Type, kindF32, encFixed, &r.floats},
		{tensorDoubleVal, protowire.Fixed64Type, kindF64, encFixed, &r.doubles},
		{tensorHalfVal, protowire.VarintType, kindF16, encVarint, &r.halves},
	} {
		err := eachRun(t, f.num, f.unpacked, func(run []byte) error {
			k, err := runLen(run, f.kind, f.enc)
			*f.n += k
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// dim adds one serialized TensorShapeProto.Dim to the shape.
func (r *tensorProtoRead) dim(d []byte) error {
	var size uint64
	for len(d) > 0 {
		num, typ, n := protowire.ConsumeTag(d)
		if n < 0 {
			return malformed("TensorShapeProto.Dim tag", n)
		}
		d = d[n:]
		m := protowire.ConsumeFieldValue(num, typ, d)
		if m < 0 {
			return malformed("TensorShapeProto.Dim field", m)
		}
		if num == dimSize && typ == protowire.VarintType {
			size, _ = protowire.ConsumeVarint(d)
		}
		d = d[m:]
	}
	return r.shape.dim(int64(size))
}

// tensorProtoConfidence is PredictConfidence for the serialized map entry
// e, whose value fields merge into one TensorProto.
func tensorProtoConfidence(e []byte, output string) (float64, error) {
	r := tensorProtoRead{shape: newShapeCount()}
	if err := eachRun(e, mapEntryValue, protowire.BytesType, r.scan); err != nil {
		return 0, err
	}
	var kind elemKind
	var field protowire.Number
	var unpacked protowire.Type
	enc := encFixed
	var n int64
	switch r.dtype {
	case dtFloat:
		kind, field, unpacked, n = kindF32, tensorFloatVal, protowire.Fixed32Type, r.floats
	case dtDouble:
		kind, field, unpacked, n = kindF64, tensorDoubleVal, protowire.Fixed64Type, r.doubles
	case dtHalf:
		kind, field, unpacked, enc, n = kindF16, tensorHalfVal, protowire.VarintType, encVarint, r.halves
	case dtBfloat16:
		kind, field, unpacked, enc, n = kindBF16, tensorHalfVal, protowire.VarintType, encVarint, r.halves
	default:
		return 0, fmt.Errorf("wire: output %q has dtype %d; confidence reads DT_FLOAT, DT_DOUBLE, DT_HALF or DT_BFLOAT16", output, r.dtype)
	}

	if len(r.content) > 0 {
		n, err := runLen(r.content, kind, encFixed)
		if err != nil {
			return 0, err
		}
		if err := checkTensor(output, &r.shape, n); err != nil {
			return 0, err
		}
		a := newRowMaxMin(r.shape.last)
		a.addRun(r.content, kind, encFixed)
		return confidenceResult(output, &a)
	}

	each := func(fn func(run []byte)) {
		_ = eachRun(e, mapEntryValue, protowire.BytesType, func(t []byte) error {
			return eachRun(t, field, unpacked, func(run []byte) error {
				fn(run)
				return nil
			})
		})
	}
	if n == 1 && !r.shape.holds(1) && !r.shape.zero && !r.shape.over {
		// One element broadcast over a shape of more: every row's maximum
		// is that element.
		a := newRowMaxMin(1)
		each(func(run []byte) { a.addRun(run, kind, enc) })
		return confidenceResult(output, &a)
	}
	if err := checkTensor(output, &r.shape, n); err != nil {
		return 0, err
	}
	a := newRowMaxMin(r.shape.last)
	each(func(run []byte) { a.addRun(run, kind, enc) })
	return confidenceResult(output, &a)
}
