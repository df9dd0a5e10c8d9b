package merge

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
)

// kserveCodec implements Codec for KServe v2 ModelInfer.
type kserveCodec struct{}

func kInvalid(format string, args ...any) error {
	return fmt.Errorf("merge: kserve: "+format+": %w", append(args, ErrInvalid)...)
}

func kUnbatchable(format string, args ...any) error {
	return fmt.Errorf("merge: kserve: "+format+": %w", append(args, ErrUnbatchable)...)
}

func kSplitErr(format string, args ...any) error {
	return fmt.Errorf("merge: kserve: "+format+": %w", append(args, ErrSplit)...)
}

// kUnbatchableParam reports whether a request, input or output parameter
// makes the request unbatchable. Sequence parameters tie a request to the
// model's per-sequence state; shared-memory parameters put the data (or the
// output buffer) outside the message, where it cannot be merged or split.
func kUnbatchableParam(name string) bool {
	return strings.HasPrefix(name, "sequence_") || strings.HasPrefix(name, "shared_memory_")
}

func kParamsBatchable(m map[string]*kservepb.InferParameter) (string, bool) {
	for n := range m {
		if kUnbatchableParam(n) {
			return n, false
		}
	}
	return "", true
}

// Parse implements Codec.
func (kserveCodec) Parse(b []byte) (*Item, error) {
	req := new(kservepb.ModelInferRequest)
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, kInvalid("decode request: %v", err)
	}
	if len(req.ProtoReflect().GetUnknown()) > 0 {
		return nil, kUnbatchable("request has unknown fields")
	}
	if len(req.Inputs) == 0 {
		return nil, kInvalid("request has no inputs")
	}
	raw := len(req.RawInputContents) > 0
	if raw && len(req.RawInputContents) != len(req.Inputs) {
		return nil, kInvalid("%d raw_input_contents for %d inputs", len(req.RawInputContents), len(req.Inputs))
	}
	if n, ok := kParamsBatchable(req.Parameters); !ok {
		return nil, kUnbatchable("request parameter %q", n)
	}

	k := make(keyBuf, 0, 128) // most keys fit: one allocation
	k.str(req.ModelName)
	k.str(req.ModelVersion)
	if !k.params(req.Parameters) {
		return nil, kUnbatchable("request parameter of unknown kind")
	}
	if raw {
		k.byte('r')
	} else {
		k.byte('t')
	}
	k.int(int64(len(req.Inputs)))

	rows := int64(-1)
	for i, in := range req.Inputs {
		if len(in.ProtoReflect().GetUnknown()) > 0 || (in.Contents != nil && len(in.Contents.ProtoReflect().GetUnknown()) > 0) {
			return nil, kUnbatchable("input %q has unknown fields", in.Name)
		}
		for _, prev := range req.Inputs[:i] {
			if prev.Name == in.Name {
				return nil, kInvalid("duplicate input %q", in.Name)
			}
		}
		kt, ok := kserveType(in.Datatype)
		if !ok {
			return nil, kInvalid("input %q: unknown datatype %q", in.Name, in.Datatype)
		}
		for _, d := range in.Shape {
			if d < 0 {
				return nil, kInvalid("input %q: negative dimension in shape %v", in.Name, in.Shape)
			}
		}
		if n, ok := kParamsBatchable(in.Parameters); !ok {
			return nil, kUnbatchable("input %q: parameter %q", in.Name, n)
		}
		if len(in.Shape) == 0 {
			return nil, kUnbatchable("input %q has no batch dimension", in.Name)
		}
		if rows >= 0 && in.Shape[0] != rows {
			return nil, kInvalid("input %q: dimension 0 is %d, input %q has %d", in.Name, in.Shape[0], req.Inputs[0].Name, rows)
		}
		rows = in.Shape[0]
		per, ok := rowElems(in.Shape[1:])
		if !ok {
			return nil, kInvalid("input %q: shape %v is too large", in.Name, in.Shape)
		}
		count, ok := mulElems(rows, per)
		if !ok {
			return nil, kInvalid("input %q: shape %v is too large", in.Name, in.Shape)
		}
		if raw {
			if in.Contents != nil {
				return nil, kInvalid("input %q: contents must not be set when raw_input_contents is used", in.Name)
			}
			data := req.RawInputContents[i]
			if kt.size == 0 {
				if !bytesElemsOK(data, count) {
					return nil, kInvalid("input %q: raw BYTES data does not hold %d length-prefixed elements", in.Name, count)
				}
			} else if int64(len(data)) != count*int64(kt.size) {
				return nil, kInvalid("input %q: raw data has %d bytes, shape %v %s needs %d", in.Name, len(data), in.Shape, in.Datatype, count*int64(kt.size))
			}
		} else {
			f := kPopulated(in.Contents)
			switch {
			case f == kMulti:
				return nil, kInvalid("input %q: more than one contents field is set", in.Name)
			case f != kNone && f != kt.field:
				return nil, kInvalid("input %q: contents field does not match datatype %s", in.Name, in.Datatype)
			case kt.field == kRawOnly && count > 0:
				return nil, kInvalid("input %q: %s data must travel in raw_input_contents", in.Name, in.Datatype)
			}
			if n := kLen(in.Contents, kt.field); int64(n) != count {
				return nil, kInvalid("input %q: contents hold %d elements, shape %v needs %d", in.Name, n, in.Shape, count)
			}
		}
		k.str(in.Name)
		k.str(in.Datatype)
		k.int(int64(len(in.Shape)))
		for _, d := range in.Shape[1:] {
			k.int(d)
		}
		if !k.params(in.Parameters) {
			return nil, kUnbatchable("input %q: parameter of unknown kind", in.Name)
		}
	}

	k.int(int64(len(req.Outputs)))
	for i, out := range req.Outputs {
		if len(out.ProtoReflect().GetUnknown()) > 0 {
			return nil, kUnbatchable("output %q has unknown fields", out.Name)
		}
		if slices.ContainsFunc(req.Outputs[:i], func(o *kservepb.ModelInferRequest_InferRequestedOutputTensor) bool { return o.Name == out.Name }) {
			return nil, kInvalid("duplicate requested output %q", out.Name)
		}
		if n, ok := kParamsBatchable(out.Parameters); !ok {
			return nil, kUnbatchable("output %q: parameter %q", out.Name, n)
		}
		k.str(out.Name)
		if !k.params(out.Parameters) {
			return nil, kUnbatchable("output %q: parameter of unknown kind", out.Name)
		}
	}
	if rows == 0 {
		return nil, kUnbatchable("request has zero rows")
	}
	if rows > maxRows {
		return nil, kUnbatchable("request has %d rows", rows)
	}
	return &Item{Rows: int(rows), Key: string(k), kreq: req}, nil
}

// Merge implements Codec.
func (kserveCodec) Merge(items []*Item) ([]byte, error) {
	total, err := checkItems("kserve", items, true)
	if err != nil {
		return nil, err
	}
	first := items[0].kreq
	out := &kservepb.ModelInferRequest{
		ModelName:    first.ModelName,
		ModelVersion: first.ModelVersion,
		Parameters:   first.Parameters,
		Inputs:       make([]*kservepb.ModelInferRequest_InferInputTensor, len(first.Inputs)),
		Outputs:      first.Outputs,
	}
	raw := len(first.RawInputContents) > 0
	if raw {
		out.RawInputContents = make([][]byte, len(first.Inputs))
	}
	var parts []*kservepb.InferTensorContents
	var rawParts [][]byte
	for i, in := range first.Inputs {
		shape := slices.Clone(in.Shape)
		shape[0] = int64(total)
		t := &kservepb.ModelInferRequest_InferInputTensor{
			Name:       in.Name,
			Datatype:   in.Datatype,
			Shape:      shape,
			Parameters: in.Parameters,
		}
		if raw {
			rawParts = rawParts[:0]
			for _, it := range items {
				rawParts = append(rawParts, it.kreq.RawInputContents[i])
			}
			out.RawInputContents[i] = concatInto(rawParts)
		} else {
			parts = parts[:0]
			for _, it := range items {
				parts = append(parts, it.kreq.Inputs[i].Contents)
			}
			kt, _ := kserveType(in.Datatype)
			t.Contents = kConcat(parts, kt.field)
		}
		out.Inputs[i] = t
	}
	b, err := marshalOpts.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("merge: kserve: encode merged request: %w", err)
	}
	return b, nil
}

// Split implements Codec.
func (kserveCodec) Split(b []byte, items []*Item) ([][]byte, error) {
	total, err := checkItems("kserve", items, true)
	if err != nil {
		return nil, err
	}
	resp := new(kservepb.ModelInferResponse)
	if err := proto.Unmarshal(b, resp); err != nil {
		return nil, kSplitErr("decode response: %v", err)
	}
	raw := len(resp.RawOutputContents) > 0
	if raw && len(resp.RawOutputContents) != len(resp.Outputs) {
		return nil, kSplitErr("%d raw_output_contents for %d outputs", len(resp.RawOutputContents), len(resp.Outputs))
	}
	rows := make([]int, len(items))
	parts := make([]*kservepb.ModelInferResponse, len(items))
	for j, it := range items {
		rows[j] = it.Rows
		p := &kservepb.ModelInferResponse{
			ModelName:    resp.ModelName,
			ModelVersion: resp.ModelVersion,
			Id:           it.kreq.Id,
			Parameters:   resp.Parameters,
			Outputs:      make([]*kservepb.ModelInferResponse_InferOutputTensor, len(resp.Outputs)),
		}
		if raw {
			p.RawOutputContents = make([][]byte, len(resp.Outputs))
		}
		parts[j] = p
	}
	for i, o := range resp.Outputs {
		kt, ok := kserveType(o.Datatype)
		if !ok {
			return nil, kSplitErr("output %q: unknown datatype %q", o.Name, o.Datatype)
		}
		if len(o.Shape) == 0 || o.Shape[0] != int64(total) {
			return nil, kSplitErr("output %q: shape %v does not start with the batch's %d rows", o.Name, o.Shape, total)
		}
		per, ok := rowElems(o.Shape[1:])
		if !ok {
			return nil, kSplitErr("output %q: bad shape %v", o.Name, o.Shape)
		}
		count, ok := mulElems(int64(total), per)
		if !ok {
			return nil, kSplitErr("output %q: bad shape %v", o.Name, o.Shape)
		}
		var ends []int
		switch {
		case raw && o.Contents != nil:
			return nil, kSplitErr("output %q: contents set beside raw_output_contents", o.Name)
		case raw && kt.size == 0:
			if ends, ok = bytesRowEnds(resp.RawOutputContents[i], per, rows); !ok {
				return nil, kSplitErr("output %q: raw BYTES data does not hold %d elements", o.Name, count)
			}
		case raw:
			if int64(len(resp.RawOutputContents[i])) != count*int64(kt.size) {
				return nil, kSplitErr("output %q: raw data has %d bytes, shape %v %s needs %d", o.Name, len(resp.RawOutputContents[i]), o.Shape, o.Datatype, count*int64(kt.size))
			}
			ends = rowEnds(rows, per*int64(kt.size))
		default:
			if f := kPopulated(o.Contents); f != kNone && f != kt.field {
				return nil, kSplitErr("output %q: contents do not match datatype %s", o.Name, o.Datatype)
			}
			if n := kLen(o.Contents, kt.field); int64(n) != count {
				return nil, kSplitErr("output %q: contents hold %d elements, shape %v needs %d", o.Name, n, o.Shape, count)
			}
			ends = rowEnds(rows, per)
		}
		lo := 0
		for j, p := range parts {
			shape := slices.Clone(o.Shape)
			shape[0] = int64(rows[j])
			t := &kservepb.ModelInferResponse_InferOutputTensor{
				Name:       o.Name,
				Datatype:   o.Datatype,
				Shape:      shape,
				Parameters: o.Parameters,
			}
			hi := ends[j]
			if raw {
				p.RawOutputContents[i] = resp.RawOutputContents[i][lo:hi:hi]
			} else {
				t.Contents = kSlice(o.Contents, kt.field, lo, hi)
			}
			p.Outputs[i] = t
			lo = hi
		}
	}
	out := make([][]byte, len(parts))
	for j, p := range parts {
		if out[j], err = marshalOpts.Marshal(p); err != nil {
			return nil, fmt.Errorf("merge: kserve: encode response %d: %w", j, err)
		}
	}
	return out, nil
}

// rowEnds returns cumulative end offsets for parts of rows[i]*unit each.
// Callers have checked that the sum fits.
func rowEnds(rows []int, unit int64) []int {
	ends := make([]int, len(rows))
	off := int64(0)
	for i, r := range rows {
		off += int64(r) * unit
		ends[i] = clampInt(off)
	}
	return ends
}
