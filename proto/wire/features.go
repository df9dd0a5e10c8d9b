package wire

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// Bounds of what Features keeps of one request: they make Features a
// fixed-size value that a scan fills without allocating, whatever the
// client sends. Real requests have one to a few inputs of two to five
// dimensions, with names of tens of bytes.
const (
	// MaxFeatureInputs is the number of inputs whose name, type and shape
	// are kept; Features.Inputs still counts the others.
	MaxFeatureInputs = 8
	// MaxFeatureDims is the number of dimensions kept of one input's
	// shape; InputFeatures.Dims still counts the others.
	MaxFeatureDims = 8
	// MaxFeatureName is the number of bytes kept of an input's name.
	MaxFeatureName = 64
	// maxFeatureDatatype is the number of bytes kept of a KServe datatype
	// ("FP32", "BYTES": the longest real one is 5).
	maxFeatureDatatype = 16
)

// Field numbers of the request messages a feature scan enters; the
// TF-Serving ones it shares with the response scan (confidence.go).
const (
	kserveInputs protowire.Number = 5 // ModelInferRequest.inputs
	inName       protowire.Number = 1 // InferInputTensor.name
	inDatatype   protowire.Number = 2 // InferInputTensor.datatype
	inShape      protowire.Number = 3 // InferInputTensor.shape (repeated int64)
	tfInputs     protowire.Number = 2 // PredictRequest.inputs (map entries)
)

// InputFeatures is what a request says of one input tensor: its name,
// datatype and shape, never its values.
type InputFeatures struct {
	name    [MaxFeatureName]byte
	nameLen int // of the whole name; name holds the first MaxFeatureName bytes
	dtype   [maxFeatureDatatype]byte
	ndtype  int
	// Shape holds the first min(Dims, MaxFeatureDims) dimensions.
	Shape [MaxFeatureDims]int64
	// Dims is the number of dimensions the input has.
	Dims int
}

// Name returns the input's name, cut to MaxFeatureName bytes (NameCut
// says whether it was). The slice is the InputFeatures' own.
func (in *InputFeatures) Name() []byte { return in.name[:min(in.nameLen, MaxFeatureName)] }

// NameCut reports whether the name was longer than MaxFeatureName.
func (in *InputFeatures) NameCut() bool { return in.nameLen > MaxFeatureName }

// Datatype returns the input's datatype: the KServe string as sent ("FP32",
// cut to 16 bytes), or TF-Serving's DataType name ("DT_FLOAT"; "DT_<n>" for
// a number this package does not name).
func (in *InputFeatures) Datatype() []byte { return in.dtype[:in.ndtype] }

// Dimensions returns the kept dimensions (Shape[:min(Dims, MaxFeatureDims)]).
func (in *InputFeatures) Dimensions() []int64 { return in.Shape[:min(in.Dims, MaxFeatureDims)] }

// AppendString appends the input as "name:datatype[d0,d1,...]", with "..."
// for dimensions past MaxFeatureDims.
func (in *InputFeatures) AppendString(b []byte) []byte {
	b = append(b, in.Name()...)
	if in.NameCut() {
		b = append(b, "..."...)
	}
	b = append(b, ':')
	b = append(b, in.Datatype()...)
	b = append(b, '[')
	for i, d := range in.Dimensions() {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	if in.Dims > MaxFeatureDims {
		b = append(b, ",..."...)
	}
	return append(b, ']')
}

func (in *InputFeatures) setName(v []byte) {
	in.nameLen = len(v)
	copy(in.name[:], v)
}

func (in *InputFeatures) setDatatype(v []byte) {
	in.ndtype = copy(in.dtype[:], v)
}

func (in *InputFeatures) addDim(d int64) {
	if in.Dims < MaxFeatureDims {
		in.Shape[in.Dims] = d
	}
	in.Dims++
}

// Features is what a request carried, read from its bytes without decoding
// any tensor contents: its size, its inputs' names, datatypes and shapes,
// and its rows. It is a fixed-size value that owns all it holds (no
// reference to the request's bytes), so that a proxy keeps it past the
// request's buffers and fills it without allocating.
type Features struct {
	// Bytes is the message's length (without the gRPC prefix).
	Bytes int64
	// Partial says the scan read only the message's first bytes (a
	// request relayed as it arrives): the inputs after them, and a cut
	// input's last dimensions, are missing.
	Partial bool
	// Rows is the first dimension of the first input, the batch
	// dimension of a model that batches; 0 when no input has a shape.
	// The first input is inputs[0] for KServe; for TF-Serving, whose
	// inputs are a map with no order, the one with the smallest name.
	Rows int64
	// Inputs is the number of inputs the request has; In holds the first
	// min(Inputs, MaxFeatureInputs) of them (Kept), in the request's
	// order for KServe and by name for TF-Serving.
	Inputs int
	In     [MaxFeatureInputs]InputFeatures
}

// Kept returns the inputs f holds.
func (f *Features) Kept() []InputFeatures { return f.In[:min(f.Inputs, MaxFeatureInputs)] }

// ScanFeatures reads the features of a request of the given kind
// (KServeTarget: a ModelInferRequest; TFServingTarget: a PredictRequest)
// into f, replacing what it held. msg is the message, or its first bytes
// when size, the message's whole length, is larger: then the scan reads as
// far as those bytes go, sets Partial, and returns no error for a field
// they cut. Every other field (the tensor contents among them) is skipped
// by its length. For a whole message that proto.Unmarshal accepts it
// agrees with the decoded message (merging repeated fields as proto3
// does); for bytes that are not a message it returns an error wrapping
// ErrMalformed, and f holds what was read before them.
func ScanFeatures(kind TargetKind, msg []byte, size int64, f *Features) error {
	*f = Features{Bytes: max(size, int64(len(msg)))}
	cut := int64(len(msg)) < f.Bytes
	var err error
	switch kind {
	case KServeTarget:
		err = scanKServeFeatures(msg, cut, f)
	case TFServingTarget:
		var keys featureKeys
		err = scanPredictFeatures(msg, cut, f, &keys)
	default:
		return nil
	}
	if err == errCut {
		err = nil
	}
	f.Partial = cut
	if kept := f.Kept(); len(kept) > 0 && kept[0].Dims > 0 {
		f.Rows = kept[0].Shape[0]
	}
	return err
}

// errCut ends a scan at the end of a message's first bytes; ScanFeatures
// turns it into Partial, so no caller sees it.
var errCut = errors.New("wire: cut by the end of the bytes read")

// fieldReader walks the fields of one message held in b. cut says that b
// ends where the bytes read end, before the message does: a field that
// runs past it ends the scan (errCut) rather than being an error.
type fieldReader struct {
	b    []byte
	cut  bool
	what string
}

// next reads the next field's tag; ok is false at the end of b.
func (r *fieldReader) next() (num protowire.Number, typ protowire.Type, ok bool, err error) {
	if len(r.b) == 0 {
		return 0, 0, false, nil
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 {
		return 0, 0, false, r.fail(n)
	}
	r.b = r.b[n:]
	return num, typ, true, nil
}

// bytes reads a length-delimited value. A value cut by the end of the
// bytes read is returned as far as it goes, with cut set; the reader is
// then at its end.
func (r *fieldReader) bytes() (v []byte, cut bool, err error) {
	m, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		return nil, false, r.fail(n)
	}
	if rest := r.b[n:]; m > uint64(len(rest)) {
		if !r.cut {
			return nil, false, malformedErr(r.what+" field", io.ErrUnexpectedEOF)
		}
		r.b = nil
		return rest, true, nil
	}
	v, r.b = r.b[n:n+int(m)], r.b[n+int(m):]
	return v, false, nil
}

// varint reads a varint value.
func (r *fieldReader) varint() (uint64, error) {
	v, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		return 0, r.fail(n)
	}
	r.b = r.b[n:]
	return v, nil
}

// skip passes over a value of the given field.
func (r *fieldReader) skip(num protowire.Number, typ protowire.Type) error {
	n := protowire.ConsumeFieldValue(num, typ, r.b)
	if n < 0 {
		return r.fail(n)
	}
	r.b = r.b[n:]
	return nil
}

// fail is the error for the negative protowire length n: errCut where the
// bytes read end before the message does, as they may cut anything.
func (r *fieldReader) fail(n int) error {
	if r.cut {
		return errCut
	}
	return malformed(r.what, n)
}

// scanKServeFeatures reads a ModelInferRequest's inputs (field 5), each a
// new element of the repeated field.
func scanKServeFeatures(b []byte, cut bool, f *Features) error {
	r := fieldReader{b: b, cut: cut, what: "ModelInferRequest"}
	for {
		num, typ, ok, err := r.next()
		if !ok || err != nil {
			return err
		}
		if num != kserveInputs || typ != protowire.BytesType {
			if err := r.skip(num, typ); err != nil {
				return err
			}
			continue
		}
		v, vcut, err := r.bytes()
		if err != nil {
			return err
		}
		var scratch InputFeatures
		in := &scratch
		if f.Inputs < MaxFeatureInputs {
			in = &f.In[f.Inputs]
		}
		f.Inputs++
		if err := scanInferInput(v, vcut, in); err != nil || vcut {
			if err == nil {
				err = errCut
			}
			return err
		}
	}
}

// scanInferInput reads an InferInputTensor: name and datatype (the last
// occurrence wins) and shape (packed and unpacked occurrences add up).
func scanInferInput(b []byte, cut bool, in *InputFeatures) error {
	r := fieldReader{b: b, cut: cut, what: "InferInputTensor"}
	for {
		num, typ, ok, err := r.next()
		if !ok || err != nil {
			return err
		}
		switch {
		case (num == inName || num == inDatatype) && typ == protowire.BytesType:
			v, vcut, err := r.bytes()
			if err != nil || vcut {
				return orCut(err)
			}
			if num == inName {
				in.setName(v)
			} else {
				in.setDatatype(v)
			}
		case num == inShape && typ == protowire.VarintType:
			v, err := r.varint()
			if err != nil {
				return err
			}
			in.addDim(int64(v))
		case num == inShape && typ == protowire.BytesType:
			v, vcut, err := r.bytes()
			if err != nil {
				return err
			}
			for len(v) > 0 {
				d, n := protowire.ConsumeVarint(v)
				if n < 0 {
					if vcut {
						return errCut
					}
					return malformed("InferInputTensor shape", n)
				}
				in.addDim(int64(d))
				v = v[n:]
			}
			if vcut {
				return errCut
			}
		default:
			if err := r.skip(num, typ); err != nil {
				return err
			}
		}
	}
}

// orCut is err, or errCut where a value was cut without one.
func orCut(err error) error {
	if err == nil {
		return errCut
	}
	return err
}

// featureKeys holds, during a PredictRequest scan, the map keys of the
// kept inputs as slices of the message, so that a repeated key (the later
// entry replaces the earlier, as proto.Unmarshal does) is found by its
// whole name, not the MaxFeatureName bytes kept.
type featureKeys [MaxFeatureInputs][]byte

// scanPredictFeatures reads a PredictRequest's inputs (field 2, map
// entries of name to TensorProto).
func scanPredictFeatures(b []byte, cut bool, f *Features, keys *featureKeys) error {
	r := fieldReader{b: b, cut: cut, what: "PredictRequest"}
	for {
		num, typ, ok, err := r.next()
		if !ok || err != nil {
			return err
		}
		if num != tfInputs || typ != protowire.BytesType {
			if err := r.skip(num, typ); err != nil {
				return err
			}
			continue
		}
		v, vcut, err := r.bytes()
		if err != nil {
			return err
		}
		var in InputFeatures
		in.ndtype = copy(in.dtype[:], dtypeNames[0]) // proto3 leaves the default out
		key, named, err := scanInputEntry(v, vcut, &in)
		switch {
		case err == nil && !vcut:
			addPredictInput(f, keys, key, &in)
		case err == nil || err == errCut:
			// A cut entry is kept only if its name was read whole.
			if named {
				addPredictInput(f, keys, key, &in)
			}
			return errCut
		default:
			return err
		}
	}
}

// addPredictInput puts one map entry among f's inputs: in place of an
// earlier entry of the same key, else in name order among the kept ones
// (the first MaxFeatureInputs read), else only counted.
func addPredictInput(f *Features, keys *featureKeys, key []byte, in *InputFeatures) {
	kept := min(f.Inputs, MaxFeatureInputs)
	for i := range kept {
		if bytes.Equal(keys[i], key) {
			f.In[i] = *in
			return
		}
	}
	f.Inputs++
	if kept == MaxFeatureInputs {
		return
	}
	i := kept
	for i > 0 && bytes.Compare(keys[i-1], key) > 0 {
		keys[i], f.In[i] = keys[i-1], f.In[i-1]
		i--
	}
	keys[i], f.In[i] = key, *in
}

// scanInputEntry reads one inputs map entry: its key (the last occurrence
// wins; named says one was read, else the key is the empty name) and its
// TensorProto (occurrences merge).
func scanInputEntry(b []byte, cut bool, in *InputFeatures) (key []byte, named bool, err error) {
	r := fieldReader{b: b, cut: cut, what: "PredictRequest.InputsEntry"}
	for {
		num, typ, ok, err := r.next()
		if !ok || err != nil {
			return key, named, err
		}
		switch {
		case num == mapEntryKey && typ == protowire.BytesType:
			v, vcut, err := r.bytes()
			if err != nil || vcut {
				return key, named, orCut(err)
			}
			key, named = v, true
			in.setName(v)
		case num == mapEntryValue && typ == protowire.BytesType:
			v, vcut, err := r.bytes()
			if err != nil {
				return key, named, err
			}
			if err := scanTensorProto(v, vcut, in); err != nil || vcut {
				return key, named, orCut(err)
			}
		default:
			if err := r.skip(num, typ); err != nil {
				return key, named, err
			}
		}
	}
}

// scanTensorProto reads a TensorProto's dtype (last wins) and tensor_shape
// (occurrences merge: their dims add up).
func scanTensorProto(b []byte, cut bool, in *InputFeatures) error {
	r := fieldReader{b: b, cut: cut, what: "TensorProto"}
	for {
		num, typ, ok, err := r.next()
		if !ok || err != nil {
			return err
		}
		switch {
		case num == tensorDtype && typ == protowire.VarintType:
			v, err := r.varint()
			if err != nil {
				return err
			}
			in.ndtype = len(appendDTypeName(in.dtype[:0], int32(v)))
		case num == tensorShape && typ == protowire.BytesType:
			v, vcut, err := r.bytes()
			if err != nil {
				return err
			}
			if err := scanTensorShape(v, vcut, in); err != nil || vcut {
				return orCut(err)
			}
		default:
			if err := r.skip(num, typ); err != nil {
				return err
			}
		}
	}
}

// scanTensorShape reads a TensorShapeProto's dims, each a new dimension
// whose size is its last size field.
func scanTensorShape(b []byte, cut bool, in *InputFeatures) error {
	r := fieldReader{b: b, cut: cut, what: "TensorShapeProto"}
	for {
		num, typ, ok, err := r.next()
		if !ok || err != nil {
			return err
		}
		if num != shapeDim || typ != protowire.BytesType {
			if err := r.skip(num, typ); err != nil {
				return err
			}
			continue
		}
		v, vcut, err := r.bytes()
		if err != nil {
			return err
		}
		if vcut {
			return errCut // a dimension whose size may not be its last
		}
		size, err := scanDim(v)
		if err != nil {
			return err
		}
		in.addDim(size)
	}
}

// scanDim reads a TensorShapeProto.Dim's size, the last occurrence winning.
func scanDim(b []byte) (int64, error) {
	r := fieldReader{b: b, what: "TensorShapeProto.Dim"}
	var size int64
	for {
		num, typ, ok, err := r.next()
		if !ok || err != nil {
			return size, err
		}
		if num == dimSize && typ == protowire.VarintType {
			v, err := r.varint()
			if err != nil {
				return 0, err
			}
			size = int64(v)
			continue
		}
		if err := r.skip(num, typ); err != nil {
			return 0, err
		}
	}
}

// dtypeNames are tensorflow.DataType's names, by number.
var dtypeNames = map[int32]string{
	0: "DT_INVALID", 1: "DT_FLOAT", 2: "DT_DOUBLE", 3: "DT_INT32", 4: "DT_UINT8", 5: "DT_INT16",
	6: "DT_INT8", 7: "DT_STRING", 8: "DT_COMPLEX64", 9: "DT_INT64", 10: "DT_BOOL", 11: "DT_QINT8",
	12: "DT_QUINT8", 13: "DT_QINT32", 14: "DT_BFLOAT16", 15: "DT_QINT16", 16: "DT_QUINT16",
	17: "DT_UINT16", 18: "DT_COMPLEX128", 19: "DT_HALF", 20: "DT_RESOURCE", 21: "DT_VARIANT",
	22: "DT_UINT32", 23: "DT_UINT64",
}

// appendDTypeName appends the name of DataType v, "DT_<v>" for a number
// without one.
func appendDTypeName(b []byte, v int32) []byte {
	if s, ok := dtypeNames[v]; ok {
		return append(b, s...)
	}
	return strconv.AppendInt(append(b, "DT_"...), int64(v), 10)
}
