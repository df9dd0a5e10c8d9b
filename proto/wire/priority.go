package wire

import "google.golang.org/protobuf/encoding/protowire"

// PriorityParameter is the request parameter Triton's schedulers read as
// a request's priority level: 1 is the highest, 0 the model's default.
const PriorityParameter = "priority"

// PriorityOf reads the priority parameter of a serialized
// ModelInferRequest (or its first bytes: parameters come before tensors)
// without unmarshalling it or allocating; false when it carries none or
// cannot be read.
func PriorityOf(b []byte) (uint64, bool) {
	var p uint64
	found := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return p, found
		}
		b = b[n:]
		if num == inferParameters && typ == protowire.BytesType {
			e, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return p, found
			}
			if v, ok := priorityEntry(e); ok {
				p, found = v, true
			}
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return p, found
		}
		b = b[n:]
	}
	return p, found
}

// priorityEntry reads one parameters map entry: its value when its key is
// priority and the value an int64 or uint64.
func priorityEntry(e []byte) (uint64, bool) {
	key, err := entryKey(e)
	if err != nil || string(key) != PriorityParameter {
		return 0, false
	}
	var p uint64
	found := false
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		e = e[n:] // entryKey read every tag and value without error
		n = protowire.ConsumeFieldValue(num, typ, e)
		if num == mapEntryValue && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(e)
			for len(v) > 0 {
				vn, vt, m := protowire.ConsumeTag(v)
				if m < 0 {
					return p, found
				}
				v = v[m:]
				if (vn == 2 || vn == 5) && vt == protowire.VarintType {
					x, m := protowire.ConsumeVarint(v)
					if m < 0 {
						return p, found
					}
					if vn == 2 && int64(x) < 0 {
						x = 0
					}
					p, found, v = x, true, v[m:]
					continue
				}
				if m = protowire.ConsumeFieldValue(vn, vt, v); m < 0 {
					return p, found
				}
				v = v[m:]
			}
		}
		e = e[n:]
	}
	return p, found
}

// AppendPriority returns a serialized ModelInferRequest b with the
// priority parameter set to level: a parameters map entry appended (a
// later entry of a key wins in a protobuf map, so it also replaces one b
// carries). b is not changed.
func AppendPriority(b []byte, level uint64) []byte {
	var v []byte
	v = protowire.AppendTag(v, 5, protowire.VarintType) // uint64_param
	v = protowire.AppendVarint(v, level)
	var e []byte
	e = protowire.AppendTag(e, mapEntryKey, protowire.BytesType)
	e = protowire.AppendString(e, PriorityParameter)
	e = protowire.AppendTag(e, mapEntryValue, protowire.BytesType)
	e = protowire.AppendBytes(e, v)
	out := make([]byte, 0, len(b)+len(e)+8)
	out = append(out, b...)
	out = protowire.AppendTag(out, inferParameters, protowire.BytesType)
	return protowire.AppendBytes(out, e)
}
