package wire

import (
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// Triton's sequence batcher reads these request parameters: all the
// requests of one sequence carry its id, the first sequence_start and the
// last sequence_end, and must reach the model instance that holds the
// sequence's state.
const (
	SequenceIDParameter    = "sequence_id"
	SequenceStartParameter = "sequence_start"
	SequenceEndParameter   = "sequence_end"
)

// Sequence is what a ModelInferRequest says of the sequence it belongs to.
type Sequence struct {
	// Model is the request's model_name, read only when it names a
	// sequence (sequence ids are the model's own).
	Model string
	// ID is sequence_id (an int64, uint64 or string parameter) as text;
	// "" when the request names none (or 0, none to Triton).
	ID string
	// Start and End are sequence_start and sequence_end.
	Start, End bool
}

// SequenceOf reads the sequence parameters of a serialized
// ModelInferRequest (or the first bytes of one: its parameters come
// before its tensors) without unmarshalling it. Bytes it cannot read give
// the zero Sequence: such a request names no sequence the proxy can keep.
func SequenceOf(b []byte) (s Sequence) {
	var model []byte
	defer func() {
		if s.ID != "" {
			s.Model = string(model)
		}
	}()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType { // model_name
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return s
			}
			model, b = v, b[n:]
			continue
		}
		if num == inferParameters && typ == protowire.BytesType {
			e, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return s
			}
			s.scanEntry(e)
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return s
		}
		b = b[n:]
	}
	return s
}

// scanEntry reads one entry of the parameters map.
func (s *Sequence) scanEntry(e []byte) {
	key, err := entryKey(e)
	if err != nil {
		return
	}
	var which *bool
	switch string(key) {
	case SequenceIDParameter:
	case SequenceStartParameter:
		which = &s.Start
	case SequenceEndParameter:
		which = &s.End
	default:
		return
	}
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		e = e[n:] // entryKey read every tag and value without error
		n = protowire.ConsumeFieldValue(num, typ, e)
		if num == mapEntryValue && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(e)
			if which != nil {
				_, *which, _ = scanBoolParam(v, 0, *which)
			} else if id, ok := paramText(v); ok {
				s.ID = id
			}
		}
		e = e[n:]
	}
}

// paramText is an InferParameter's int64, uint64 or string value as text,
// the last one set winning as in proto3.
func paramText(p []byte) (string, bool) {
	var out string
	ok := false
	for len(p) > 0 {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return "", false
		}
		p = p[n:]
		switch {
		case (num == 2 || num == 5) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(p)
			if n < 0 {
				return "", false
			}
			if num == 2 {
				out = strconv.FormatInt(int64(v), 10)
			} else {
				out = strconv.FormatUint(v, 10)
			}
			p, ok = p[n:], true
		case num == 3 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(p)
			if n < 0 {
				return "", false
			}
			out, p, ok = string(v), p[n:], true
		default:
			n = protowire.ConsumeFieldValue(num, typ, p)
			if n < 0 {
				return "", false
			}
			p = p[n:]
		}
	}
	// Triton reads a sequence id of 0 as none.
	return out, ok && out != "" && out != "0"
}
