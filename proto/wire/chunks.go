package wire

import (
	"errors"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// ModelInferTargetChunks is ModelInferTarget for a message held in several
// chunks in order (as gRPC holds a received message, one buffer per HTTP/2
// frame), scanned without joining them first.
func ModelInferTargetChunks(chunks [][]byte) (model, version string, err error) {
	if len(chunks) == 1 {
		return ModelInferTarget(chunks[0])
	}
	r := chunkReader{rest: chunks}
	var name, ver []byte
	for !r.done() {
		num, typ, err := r.tag()
		if err != nil {
			return "", "", malformedErr("ModelInferRequest tag", err)
		}
		if typ == protowire.BytesType && (num == kserveName || num == kserveVersion) {
			v, err := r.bytes()
			if err != nil {
				return "", "", malformedErr("ModelInferRequest name", err)
			}
			if num == kserveName {
				name = v
			} else {
				ver = v
			}
			continue
		}
		if err := r.skipValue(num, typ, protowire.DefaultRecursionLimit); err != nil {
			return "", "", malformedErr("ModelInferRequest field", err)
		}
	}
	return string(name), string(ver), nil
}

// PredictTargetChunks is PredictTarget for a message held in several chunks
// in order, scanned without joining them first.
func PredictTargetChunks(chunks [][]byte) (model, version string, err error) {
	if len(chunks) == 1 {
		return PredictTarget(chunks[0])
	}
	r := chunkReader{rest: chunks}
	var t specTarget
	for !r.done() {
		num, typ, err := r.tag()
		if err != nil {
			return "", "", malformedErr("PredictRequest tag", err)
		}
		if num == tfModelSpec && typ == protowire.BytesType {
			v, err := r.bytes()
			if err != nil {
				return "", "", malformedErr("PredictRequest model_spec", err)
			}
			if err := t.scan(v); err != nil {
				return "", "", err
			}
			continue
		}
		if err := r.skipValue(num, typ, protowire.DefaultRecursionLimit); err != nil {
			return "", "", malformedErr("PredictRequest field", err)
		}
	}
	return t.result()
}

// Parse errors of chunkReader; protowire keeps its own unexported.
var (
	errFieldNumber = errors.New("invalid field number")
	errEndGroup    = errors.New("mismatching end group marker")
	errReserved    = errors.New("cannot parse reserved wire type")
	errDepth       = errors.New("exceeded maximum recursion depth")
)

// chunkReader reads protobuf wire values across chunk boundaries. Values
// that lie within one chunk are returned without copying.
type chunkReader struct {
	cur  []byte   // unread part of the current chunk
	rest [][]byte // chunks after cur
}

// done reports whether every byte has been read.
func (r *chunkReader) done() bool {
	for len(r.cur) == 0 {
		if len(r.rest) == 0 {
			return true
		}
		r.cur, r.rest = r.rest[0], r.rest[1:]
	}
	return false
}

// varint reads one varint.
func (r *chunkReader) varint() (uint64, error) {
	if r.done() {
		return 0, io.ErrUnexpectedEOF
	}
	// Fast path: the varint cannot run past this chunk.
	if len(r.cur) >= binaryMaxVarintLen {
		v, n := protowire.ConsumeVarint(r.cur)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		r.cur = r.cur[n:]
		return v, nil
	}
	var buf [binaryMaxVarintLen]byte
	n := 0
	for n < len(buf) && !r.done() {
		c := r.cur[0]
		r.cur = r.cur[1:]
		buf[n] = c
		n++
		if c < 0x80 {
			break
		}
	}
	v, m := protowire.ConsumeVarint(buf[:n])
	if m < 0 {
		return 0, protowire.ParseError(m)
	}
	return v, nil
}

const binaryMaxVarintLen = 10

// tag reads one field tag.
func (r *chunkReader) tag() (protowire.Number, protowire.Type, error) {
	v, err := r.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		return 0, 0, errFieldNumber
	}
	return num, typ, nil
}

// bytes reads one length-prefixed value. It is copied only when it spans
// chunks.
func (r *chunkReader) bytes() ([]byte, error) {
	n, err := r.varint()
	if err != nil {
		return nil, err
	}
	if n <= uint64(len(r.cur)) {
		v := r.cur[:n]
		r.cur = r.cur[n:]
		return v, nil
	}
	if n > uint64(r.remaining()) {
		return nil, io.ErrUnexpectedEOF
	}
	v := make([]byte, 0, n)
	for uint64(len(v)) < n {
		r.done()
		k := min(uint64(len(r.cur)), n-uint64(len(v)))
		v = append(v, r.cur[:k]...)
		r.cur = r.cur[k:]
	}
	return v, nil
}

// remaining returns the number of unread bytes.
func (r *chunkReader) remaining() int {
	n := len(r.cur)
	for _, c := range r.rest {
		n += len(c)
	}
	return n
}

// skip discards n bytes.
func (r *chunkReader) skip(n uint64) error {
	for n > 0 {
		if r.done() {
			return io.ErrUnexpectedEOF
		}
		k := min(uint64(len(r.cur)), n)
		r.cur = r.cur[k:]
		n -= k
	}
	return nil
}

// skipValue discards the value of a field whose tag was just read, as
// protowire.ConsumeFieldValue does for a flat buffer.
func (r *chunkReader) skipValue(num protowire.Number, typ protowire.Type, depth int) error {
	switch typ {
	case protowire.VarintType:
		_, err := r.varint()
		return err
	case protowire.Fixed32Type:
		return r.skip(4)
	case protowire.Fixed64Type:
		return r.skip(8)
	case protowire.BytesType:
		n, err := r.varint()
		if err != nil {
			return err
		}
		return r.skip(n)
	case protowire.StartGroupType:
		if depth < 0 {
			return errDepth
		}
		for {
			num2, typ2, err := r.tag()
			if err != nil {
				return err
			}
			if typ2 == protowire.EndGroupType {
				if num2 != num {
					return errEndGroup
				}
				return nil
			}
			if err := r.skipValue(num2, typ2, depth-1); err != nil {
				return err
			}
		}
	case protowire.EndGroupType:
		return errEndGroup
	default:
		return errReserved
	}
}
