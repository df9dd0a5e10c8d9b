package proxy

import (
	"fmt"
	"slices"
	"sync/atomic"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Frame is one gRPC message as the bytes that travelled on the wire. The
// proxy's codec fills a Frame on receive and sends its bytes unchanged, so
// a payload is never decoded on the passthrough path.
//
// A received Frame holds references to gRPC's pooled buffers; call Free once
// it is no longer needed so they return to the pool (forgetting is safe, the
// garbage collector then reclaims them instead). Sending a Frame does not
// consume it: gRPC takes its own reference.
type Frame struct {
	data mem.BufferSlice
	// flat is the contiguous copy Bytes makes of a multi-buffer frame.
	// Atomic: a hedge's goroutine and the primary's may ask at once.
	flat atomic.Pointer[[]byte]
	// one backs data for a single-buffer message, saving an allocation.
	// It is filled at most once: gRPC may still read a slice of it after
	// the frame was sent.
	one [1]mem.Buffer
}

// NewFrame returns a Frame that sends b. The Frame does not copy b, so b
// must not change until the Frame has been sent.
func NewFrame(b []byte) *Frame {
	f := &Frame{}
	f.one[0] = mem.SliceBuffer(b)
	f.data = f.one[:]
	return f
}

// Len returns the number of payload bytes in f.
func (f *Frame) Len() int { return f.data.Len() }

// Bytes returns f's payload as one slice, which must not be modified. It is
// free for a frame held in one buffer; a frame split over several buffers is
// copied once and the copy kept.
func (f *Frame) Bytes() []byte {
	if len(f.data) == 1 {
		return f.data[0].ReadOnlyData()
	}
	if p := f.flat.Load(); p != nil {
		return *p
	}
	b := f.data.Materialize()
	if !f.flat.CompareAndSwap(nil, &b) {
		return *f.flat.Load() // another goroutine's copy won
	}
	return b
}

// Chunks appends f's payload, buffer by buffer, to dst and returns it; the
// slices must not be modified and are valid until Free.
func (f *Frame) Chunks(dst [][]byte) [][]byte {
	for _, b := range f.data {
		dst = append(dst, b.ReadOnlyData())
	}
	return dst
}

// Free releases f's buffers; f is empty afterwards. The buffer list is
// dropped, not cleared: gRPC may still hold it after a send.
func (f *Frame) Free() {
	f.data.Free()
	f.data = nil
	f.flat.Store(nil)
}

// rawCodec is the proxy's encoding.CodecV2. A *Frame passes through as raw
// bytes; any other proto.Message falls back to protobuf, so services
// registered on the proxy's own server keep working.
//
// Its name is empty on purpose: on the client side gRPC derives the
// content-subtype from the codec name, and "" gives plain
// "application/grpc", what standard clients send. The handler forwards a
// client's own subtype with grpc.CallContentSubtype.
type rawCodec struct{}

var _ encoding.CodecV2 = rawCodec{}

// Marshal returns the frame's buffers with one more reference, which gRPC
// frees once they are written.
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *Frame:
		m.data.Ref()
		return m.data, nil
	case proto.Message:
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("proxy: codec: marshal %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	default:
		return nil, fmt.Errorf("proxy: codec: cannot marshal %T", v)
	}
}

// Unmarshal keeps a reference to data in the frame instead of copying it:
// gRPC frees its own reference when Unmarshal returns.
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *Frame:
		m.Free()
		data.Ref()
		// Copy the buffer list: gRPC owns the one it passed in.
		if len(data) == 1 && m.one[0] == nil {
			m.one[0] = data[0]
			m.data = m.one[:]
		} else {
			m.data = slices.Clone(data)
		}
		return nil
	case proto.Message:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		if err := proto.Unmarshal(buf.ReadOnlyData(), m); err != nil {
			return fmt.Errorf("proxy: codec: unmarshal %T: %w", v, err)
		}
		return nil
	default:
		return fmt.Errorf("proxy: codec: cannot unmarshal into %T", v)
	}
}

// Name returns "" (see rawCodec).
func (rawCodec) Name() string { return "" }

// Codec returns the codec the proxy uses on both sides: it moves *Frame
// values as raw bytes and falls back to protobuf for other messages. Use it
// with grpc.ForceCodecV2 to call through the proxy with raw frames.
func Codec() encoding.CodecV2 { return rawCodec{} }
