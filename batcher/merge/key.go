package merge

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/infergate/infergate/proto/kservepb"
)

// keyBuf builds a compatibility key. Every string is length-prefixed, so
// distinct field sequences can never encode to the same bytes.
type keyBuf []byte

func (k *keyBuf) str(s string) {
	*k = binary.AppendUvarint(*k, uint64(len(s)))
	*k = append(*k, s...)
}

func (k *keyBuf) int(v int64) { *k = binary.AppendVarint(*k, v) }

func (k *keyBuf) byte(b byte) { *k = append(*k, b) }

// params appends a KServe parameter map in key order. It reports false when
// a parameter has a value kind this package does not know (an unknown oneof
// field), which makes the request unbatchable.
func (k *keyBuf) params(m map[string]*kservepb.InferParameter) bool {
	k.int(int64(len(m)))
	if len(m) == 0 {
		return true
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		k.str(n)
		p := m[n]
		if len(p.ProtoReflect().GetUnknown()) > 0 {
			return false
		}
		switch v := p.GetParameterChoice().(type) {
		case *kservepb.InferParameter_BoolParam:
			k.byte('b')
			if v.BoolParam {
				k.byte(1)
			} else {
				k.byte(0)
			}
		case *kservepb.InferParameter_Int64Param:
			k.byte('i')
			k.int(v.Int64Param)
		case *kservepb.InferParameter_StringParam:
			k.byte('s')
			k.str(v.StringParam)
		case *kservepb.InferParameter_DoubleParam:
			k.byte('d')
			*k = binary.LittleEndian.AppendUint64(*k, math.Float64bits(v.DoubleParam))
		case *kservepb.InferParameter_Uint64Param:
			k.byte('u')
			*k = binary.AppendUvarint(*k, v.Uint64Param)
		case nil:
			k.byte('0')
		default:
			return false
		}
	}
	return true
}
