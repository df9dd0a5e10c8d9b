package merge

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// tfCodec implements Codec for TF-Serving Predict.
type tfCodec struct{}

func tInvalid(format string, args ...any) error {
	return fmt.Errorf("merge: tf: "+format+": %w", append(args, ErrInvalid)...)
}

func tUnbatchable(format string, args ...any) error {
	return fmt.Errorf("merge: tf: "+format+": %w", append(args, ErrUnbatchable)...)
}

func tSplitErr(format string, args ...any) error {
	return fmt.Errorf("merge: tf: "+format+": %w", append(args, ErrSplit)...)
}

func hasUnknown(m proto.Message) bool {
	return len(m.ProtoReflect().GetUnknown()) > 0
}

// tfSpecKey appends the model spec to k; false means it carries unknown
// fields.
func tfSpecKey(k *keyBuf, s *tfservingpb.ModelSpec) bool {
	if hasUnknown(s) {
		return false
	}
	k.str(s.Name)
	k.str(s.SignatureName)
	switch v := s.VersionChoice.(type) {
	case *tfservingpb.ModelSpec_Version:
		if v.Version == nil {
			k.byte('n')
			break
		}
		if hasUnknown(v.Version) {
			return false
		}
		k.byte('v')
		k.int(v.Version.Value)
	case *tfservingpb.ModelSpec_VersionLabel:
		k.byte('l')
		k.str(v.VersionLabel)
	default:
		k.byte('-')
	}
	return true
}

// Parse implements Codec.
func (tfCodec) Parse(b []byte) (*Item, error) {
	req := new(tfservingpb.PredictRequest)
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, tInvalid("decode request: %v", err)
	}
	if hasUnknown(req) {
		return nil, tUnbatchable("request has unknown fields")
	}
	if req.ModelSpec == nil {
		return nil, tInvalid("request has no model_spec")
	}
	// A merged request could carry only one of each: such requests go
	// upstream alone, as sent, so the server sees every field.
	if req.ClientId != nil || req.RequestOptions != nil || req.PredictStreamedOptions != nil {
		return nil, tUnbatchable("request carries client_id, request_options or predict_streamed_options")
	}
	if len(req.Inputs) == 0 {
		return nil, tInvalid("request has no inputs")
	}
	k := make(keyBuf, 0, 128) // most keys fit: one allocation
	if !tfSpecKey(&k, req.ModelSpec) {
		return nil, tUnbatchable("model_spec has unknown fields")
	}
	names := make([]string, 0, len(req.Inputs))
	for n := range req.Inputs {
		names = append(names, n)
	}
	slices.Sort(names)
	k.int(int64(len(names)))

	rows := int64(-1)
	for _, name := range names {
		t := req.Inputs[name]
		if t == nil {
			return nil, tInvalid("input %q is empty", name)
		}
		if hasUnknown(t) || (t.TensorShape != nil && hasUnknown(t.TensorShape)) {
			return nil, tUnbatchable("input %q has unknown fields", name)
		}
		if t.Dtype == tensorflowpb.DataType_DT_INVALID {
			return nil, tInvalid("input %q: dtype is DT_INVALID", name)
		}
		tt, ok := tfType(t.Dtype)
		if !ok {
			return nil, tUnbatchable("input %q: dtype %v is not batchable", name, t.Dtype)
		}
		if t.TensorShape.GetUnknownRank() {
			return nil, tInvalid("input %q: shape has unknown rank", name)
		}
		dims := t.TensorShape.GetDim()
		shape := make([]int64, len(dims))
		for i, d := range dims {
			if hasUnknown(d) {
				return nil, tUnbatchable("input %q has unknown fields", name)
			}
			if d.Size < 0 {
				return nil, tInvalid("input %q: dimension %d is %d", name, i, d.Size)
			}
			shape[i] = d.Size
		}
		if len(shape) == 0 {
			return nil, tUnbatchable("input %q has no batch dimension", name)
		}
		if rows >= 0 && shape[0] != rows {
			return nil, tInvalid("input %q: dimension 0 is %d, input %q has %d", name, shape[0], names[0], rows)
		}
		rows = shape[0]
		per, ok := rowElems(shape[1:])
		if !ok {
			return nil, tInvalid("input %q: shape %v is too large", name, shape)
		}
		count, ok := mulElems(rows, per)
		if !ok {
			return nil, tInvalid("input %q: shape %v is too large", name, shape)
		}
		content := len(t.TensorContent) > 0
		f := tPopulated(t)
		switch {
		case content && f != tNone:
			return nil, tInvalid("input %q: both tensor_content and a *_val field are set", name)
		case content && tt.size == 0:
			return nil, tUnbatchable("input %q: DT_STRING in tensor_content", name)
		case content && int64(len(t.TensorContent)) != count*int64(tt.size):
			return nil, tInvalid("input %q: tensor_content has %d bytes, shape %v %v needs %d", name, len(t.TensorContent), shape, t.Dtype, count*int64(tt.size))
		case content:
		case f == tMulti:
			return nil, tInvalid("input %q: more than one *_val field is set", name)
		case f != tNone && f != tt.field:
			return nil, tInvalid("input %q: *_val field does not match dtype %v", name, t.Dtype)
		default:
			n := int64(tLen(t, tt.field))
			if n > count {
				return nil, tInvalid("input %q: %d values for shape %v (%d elements)", name, n, shape, count)
			}
			if n != count {
				// TF repeats the last value (or zero-fills); keep that
				// shorthand intact by sending the request alone.
				return nil, tUnbatchable("input %q: %d values broadcast to %d elements", name, n, count)
			}
		}
		k.str(name)
		k.int(int64(t.Dtype))
		k.int(int64(t.VersionNumber))
		k.int(int64(len(dims)))
		k.str(dims[0].Name)
		for _, d := range dims[1:] {
			k.int(d.Size)
			k.str(d.Name)
		}
		if content {
			k.byte('c')
		} else {
			k.byte('v')
		}
	}

	filter := slices.Clone(req.OutputFilter)
	slices.Sort(filter)
	if len(slices.Compact(slices.Clone(filter))) != len(filter) {
		return nil, tInvalid("output_filter names an output twice")
	}
	k.int(int64(len(filter)))
	for _, o := range filter {
		k.str(o)
	}
	if rows == 0 {
		return nil, tUnbatchable("request has zero rows")
	}
	if rows > maxRows {
		return nil, tUnbatchable("request has %d rows", rows)
	}
	return &Item{Rows: int(rows), Key: string(k), treq: req, tnames: names}, nil
}

// Merge implements Codec.
func (tfCodec) Merge(items []*Item) ([]byte, error) {
	total, err := checkItems("tf", items, false)
	if err != nil {
		return nil, err
	}
	first := items[0]
	out := &tfservingpb.PredictRequest{
		ModelSpec:    first.treq.ModelSpec,
		Inputs:       make(map[string]*tensorflowpb.TensorProto, len(first.tnames)),
		OutputFilter: first.treq.OutputFilter,
	}
	parts := make([]*tensorflowpb.TensorProto, len(items))
	var raw [][]byte
	for _, name := range first.tnames {
		t0 := first.treq.Inputs[name]
		for j, it := range items {
			parts[j] = it.treq.Inputs[name]
		}
		dims := slices.Clone(t0.TensorShape.Dim)
		dims[0] = &tensorflowpb.TensorShapeProto_Dim{Size: int64(total), Name: dims[0].Name}
		mt := &tensorflowpb.TensorProto{
			Dtype:         t0.Dtype,
			TensorShape:   &tensorflowpb.TensorShapeProto{Dim: dims},
			VersionNumber: t0.VersionNumber,
		}
		if len(t0.TensorContent) > 0 {
			raw = raw[:0]
			for _, p := range parts {
				raw = append(raw, p.TensorContent)
			}
			mt.TensorContent = concatInto(raw)
		} else {
			tt, _ := tfType(t0.Dtype)
			tConcat(mt, parts, tt.field)
		}
		out.Inputs[name] = mt
	}
	b, err := marshalOpts.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("merge: tf: encode merged request: %w", err)
	}
	return b, nil
}

// Split implements Codec.
func (tfCodec) Split(b []byte, items []*Item) ([][]byte, error) {
	total, err := checkItems("tf", items, false)
	if err != nil {
		return nil, err
	}
	resp := new(tfservingpb.PredictResponse)
	if err := proto.Unmarshal(b, resp); err != nil {
		return nil, tSplitErr("decode response: %v", err)
	}
	rows := make([]int, len(items))
	parts := make([]*tfservingpb.PredictResponse, len(items))
	for j, it := range items {
		rows[j] = it.Rows
		parts[j] = &tfservingpb.PredictResponse{
			ModelSpec: resp.ModelSpec,
			Outputs:   make(map[string]*tensorflowpb.TensorProto, len(resp.Outputs)),
		}
	}
	for name, t := range resp.Outputs {
		if t == nil {
			return nil, tSplitErr("output %q is empty", name)
		}
		tt, ok := tfType(t.Dtype)
		if !ok {
			return nil, tSplitErr("output %q: dtype %v cannot be split", name, t.Dtype)
		}
		dims := t.TensorShape.GetDim()
		if len(dims) == 0 || dims[0].Size != int64(total) {
			return nil, tSplitErr("output %q: shape does not start with the batch's %d rows", name, total)
		}
		shape := make([]int64, len(dims)-1)
		for i, d := range dims[1:] {
			shape[i] = d.Size
		}
		per, ok := rowElems(shape)
		if !ok {
			return nil, tSplitErr("output %q: bad shape", name)
		}
		count, ok := mulElems(int64(total), per)
		if !ok {
			return nil, tSplitErr("output %q: bad shape", name)
		}
		content := len(t.TensorContent) > 0
		var ends []int
		var f tField
		// short is the number of *_val values when a response uses TF's
		// shorthand of fewer values than elements (the last one repeats).
		short := -1
		switch pf := tPopulated(t); {
		case content && pf != tNone:
			return nil, tSplitErr("output %q: both tensor_content and a *_val field are set", name)
		case content && tt.size == 0:
			return nil, tSplitErr("output %q: DT_STRING in tensor_content", name)
		case content:
			if int64(len(t.TensorContent)) != count*int64(tt.size) {
				return nil, tSplitErr("output %q: tensor_content has %d bytes, needs %d", name, len(t.TensorContent), count*int64(tt.size))
			}
			ends = rowEnds(rows, per*int64(tt.size))
		case pf != tNone && pf != tt.field:
			return nil, tSplitErr("output %q: *_val field does not match dtype %v", name, t.Dtype)
		default:
			f = tt.field
			n := int64(tLen(t, f))
			if n > count {
				return nil, tSplitErr("output %q: %d values for %d elements", name, n, count)
			}
			if n == 0 {
				// Zero-filled: every part is zero-filled too.
				ends = make([]int, len(rows))
			} else {
				ends = rowEnds(rows, per)
				if n < count {
					short = int(n)
				}
			}
		}
		lo := 0
		for j, p := range parts {
			pd := make([]*tensorflowpb.TensorShapeProto_Dim, len(dims))
			copy(pd, dims)
			pd[0] = &tensorflowpb.TensorShapeProto_Dim{Size: int64(rows[j]), Name: dims[0].Name}
			pt := &tensorflowpb.TensorProto{
				Dtype:         t.Dtype,
				TensorShape:   &tensorflowpb.TensorShapeProto{Dim: pd},
				VersionNumber: t.VersionNumber,
			}
			hi := ends[j]
			if content {
				pt.TensorContent = t.TensorContent[lo:hi:hi]
			} else {
				vlo, vhi := shortRange(lo, hi, short)
				tSlice(pt, t, f, vlo, vhi)
			}
			p.Outputs[name] = pt
			lo = hi
		}
	}
	out := make([][]byte, len(parts))
	for j, p := range parts {
		if out[j], err = marshalOpts.Marshal(p); err != nil {
			return nil, fmt.Errorf("merge: tf: encode response %d: %w", j, err)
		}
	}
	return out, nil
}

// shortRange maps a part's element range [lo, hi) onto a *_val field that
// holds only n values, the rest repeating the last one (n < 0: all values
// present). A part that starts past the stored values gets just the last
// value, which TF broadcasts over its shape; a part that straddles the end
// gets the stored tail, whose last value repeats the same way. No values are
// ever expanded, so a tiny response cannot make a huge allocation.
func shortRange(lo, hi, n int) (int, int) {
	switch {
	case n < 0 || hi <= n || lo == hi:
		return lo, hi
	case lo < n:
		return lo, n
	default:
		return n - 1, n
	}
}
