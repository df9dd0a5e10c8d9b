package load

import (
	"fmt"

	"google.golang.org/grpc/mem"
)

// rawCodec passes request bytes through untouched and only measures the
// response, so neither direction pays for protobuf encoding. It names itself
// "proto" because grpc uses the codec name as the content-subtype, and model
// servers only accept application/grpc(+proto).
type rawCodec struct{}

// sink receives a response frame; only its size is kept, because the bytes
// are freed by grpc as soon as Unmarshal returns.
type sink struct{ n int }

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch b := v.(type) {
	case []byte:
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	case *[]byte:
		return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
	default:
		return nil, fmt.Errorf("load: raw codec: cannot marshal %T", v)
	}
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch dst := v.(type) {
	case *sink:
		dst.n = data.Len()
		return nil
	case *[]byte:
		*dst = data.Materialize()
		return nil
	default:
		return fmt.Errorf("load: raw codec: cannot unmarshal into %T", v)
	}
}
