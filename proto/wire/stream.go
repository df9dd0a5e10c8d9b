package wire

import (
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the ModelStreamInfer messages the stream scanners read.
const (
	// inferID and inferParameters are id and parameters in both
	// ModelInferRequest and ModelInferResponse.
	inferID         protowire.Number = 3
	inferParameters protowire.Number = 4

	// Fields of ModelStreamInferResponse.
	streamErrorMessage  protowire.Number = 1
	streamInferResponse protowire.Number = 2

	// paramBool is bool_param, the first member of InferParameter's oneof.
	paramBool protowire.Number = 1
)

// otherParamTypes are the wire types of InferParameter's other oneof
// members, by field number: int64_param, string_param, double_param,
// uint64_param.
var otherParamTypes = [...]protowire.Type{2: protowire.VarintType, 3: protowire.BytesType, 4: protowire.Fixed64Type, 5: protowire.VarintType}

// FinalResponseParameter is the response parameter (a bool) by which
// Triton marks the last response to a request on a ModelStreamInfer
// stream. Triton sets it on every stream response of a decoupled model:
// false on all but the last.
const FinalResponseParameter = "triton_final_response"

// InferRequestInfo is what a stream meter reads of one ModelInferRequest:
// the model, version and id (fields 1, 2 and 3). The slices alias the
// scanned message (a value that spans two chunks is a copy); nil when the
// field is absent.
type InferRequestInfo struct {
	Model, Version, ID []byte
}

// ScanInferRequest reads the model name, version and id of a serialized
// ModelInferRequest without unmarshalling it: every other field, the tensor
// contents included, is skipped by its length, and the last occurrence of
// a field wins, as in proto3. Malformed bytes give an error wrapping
// ErrMalformed.
func ScanInferRequest(b []byte) (InferRequestInfo, error) {
	return scanInferRequest(chunkReader{cur: b})
}

// ScanInferRequestChunks is ScanInferRequest for a message held in several
// chunks in order (as gRPC holds a large received message).
func ScanInferRequestChunks(chunks [][]byte) (InferRequestInfo, error) {
	return scanInferRequest(chunkReader{rest: chunks})
}

// scanInferRequest is both forms over r, taken by value so that a flat
// scan allocates nothing.
func scanInferRequest(r chunkReader) (InferRequestInfo, error) {
	var info InferRequestInfo
	for !r.done() {
		num, typ, err := r.tag()
		if err != nil {
			return InferRequestInfo{}, malformedErr("ModelInferRequest tag", err)
		}
		if typ == protowire.BytesType && (num == kserveName || num == kserveVersion || num == inferID) {
			v, err := r.bytes()
			if err != nil {
				return InferRequestInfo{}, malformedErr("ModelInferRequest field", err)
			}
			switch num {
			case kserveName:
				info.Model = v
			case kserveVersion:
				info.Version = v
			default:
				info.ID = v
			}
			continue
		}
		if err := r.skipValue(num, typ, protowire.DefaultRecursionLimit); err != nil {
			return InferRequestInfo{}, malformedErr("ModelInferRequest field", err)
		}
	}
	return info, nil
}

// StreamResponseInfo is what a stream meter reads of one
// ModelStreamInferResponse.
type StreamResponseInfo struct {
	// ID is infer_response.id (Triton copies the request's id), aliasing
	// the scanned message; nil when absent.
	ID []byte
	// Error is true when error_message is not empty: the request failed.
	Error bool
	// HasFinal is true when infer_response carries the
	// triton_final_response parameter, and Final is its bool value (false
	// when the parameter holds another type).
	HasFinal, Final bool
	// Empty is true when infer_response has neither outputs nor
	// raw_output_contents: an error, or the empty final response Triton
	// sends when a request asks for triton_enable_empty_final_response.
	Empty bool
}

// ScanStreamResponse reads the id, the error flag, the final flag and
// whether there are outputs from a serialized ModelStreamInferResponse
// without unmarshalling it: the output tensors are skipped by their
// length. It follows proto3: the last id wins, repeated infer_response
// fields merge, a map key given twice keeps its last entry, and a oneof
// holds its last member. Malformed bytes give an error wrapping
// ErrMalformed.
func ScanStreamResponse(b []byte) (StreamResponseInfo, error) {
	return scanStreamResponse(chunkReader{cur: b})
}

// ScanStreamResponseChunks is ScanStreamResponse for a message held in
// several chunks in order. The infer_response, which holds the tensors,
// is scanned in place, never joined.
func ScanStreamResponseChunks(chunks [][]byte) (StreamResponseInfo, error) {
	return scanStreamResponse(chunkReader{rest: chunks})
}

// scanStreamResponse is both forms over r, taken by value so that a flat
// scan allocates nothing.
func scanStreamResponse(r chunkReader) (StreamResponseInfo, error) {
	info := StreamResponseInfo{Empty: true}
	for !r.done() {
		num, typ, err := r.tag()
		if err != nil {
			return StreamResponseInfo{}, malformedErr("ModelStreamInferResponse tag", err)
		}
		if typ == protowire.BytesType && num == streamErrorMessage {
			v, err := r.bytes()
			if err != nil {
				return StreamResponseInfo{}, malformedErr("ModelStreamInferResponse error_message", err)
			}
			info.Error = len(v) > 0
			continue
		}
		if typ == protowire.BytesType && num == streamInferResponse {
			n, err := r.varint()
			if err != nil {
				return StreamResponseInfo{}, malformedErr("ModelStreamInferResponse infer_response", err)
			}
			var sub chunkReader
			if n <= uint64(len(r.cur)) {
				// Within one chunk: every small response.
				sub.cur, r.cur = r.cur[:n], r.cur[n:]
			} else if sub.rest, err = r.span(n); err != nil {
				return StreamResponseInfo{}, malformedErr("ModelStreamInferResponse infer_response", err)
			}
			if info, err = info.scanInferResponse(sub); err != nil {
				return StreamResponseInfo{}, err
			}
			continue
		}
		if err := r.skipValue(num, typ, protowire.DefaultRecursionLimit); err != nil {
			return StreamResponseInfo{}, malformedErr("ModelStreamInferResponse field", err)
		}
	}
	return info, nil
}

// scanInferResponse returns info with one serialized ModelInferResponse,
// read by r, merged in.
func (info StreamResponseInfo) scanInferResponse(r chunkReader) (StreamResponseInfo, error) {
	for !r.done() {
		num, typ, err := r.tag()
		if err != nil {
			return info, malformedErr("ModelInferResponse tag", err)
		}
		if typ == protowire.BytesType {
			switch num {
			case inferID:
				if info.ID, err = r.bytes(); err != nil {
					return info, malformedErr("ModelInferResponse id", err)
				}
				continue
			case inferParameters:
				e, err := r.bytes()
				if err != nil {
					return info, malformedErr("ModelInferResponse parameters", err)
				}
				if err := info.scanParameter(e); err != nil {
					return info, err
				}
				continue
			case inferRespOutputs, inferRespRaw:
				info.Empty = false
			}
		}
		if err := r.skipValue(num, typ, protowire.DefaultRecursionLimit); err != nil {
			return info, malformedErr("ModelInferResponse field", err)
		}
	}
	return info, nil
}

// scanParameter reads one entry of the parameters map: only the final
// flag's entry changes info.
func (info *StreamResponseInfo) scanParameter(e []byte) error {
	key, err := entryKey(e)
	if err != nil || string(key) != FinalResponseParameter {
		return err
	}
	// The value may occur more than once in an entry; its occurrences
	// merge, so the oneof is judged on all of them in order.
	var (
		last   protowire.Number
		isTrue bool
	)
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		e = e[n:] // entryKey read every tag and value without error
		n = protowire.ConsumeFieldValue(num, typ, e)
		if num == mapEntryValue && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(e)
			if last, isTrue, err = scanBoolParam(v, last, isTrue); err != nil {
				return err
			}
		}
		e = e[n:]
	}
	// A later entry with the same key replaces an earlier one, so each
	// sets both fields.
	info.HasFinal = true
	info.Final = last == paramBool && isTrue
	return nil
}

// scanBoolParam merges one serialized InferParameter into the oneof state
// (last, the member set last; b, bool_param's value) and returns it.
func scanBoolParam(p []byte, last protowire.Number, b bool) (protowire.Number, bool, error) {
	for len(p) > 0 {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return 0, false, malformed("InferParameter tag", n)
		}
		p = p[n:]
		if num == paramBool && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(p)
			if n < 0 {
				return 0, false, malformed("InferParameter bool_param", n)
			}
			p = p[n:]
			last, b = paramBool, v != 0
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, p)
		if n < 0 {
			return 0, false, malformed("InferParameter field", n)
		}
		p = p[n:]
		// The oneof's other members (int64, string, double, uint64)
		// clear bool_param when set; with another wire type a field is
		// unknown and sets nothing.
		if num > paramBool && num < protowire.Number(len(otherParamTypes)) && otherParamTypes[num] == typ {
			last = num
		}
	}
	return last, b, nil
}

// span returns the next n bytes as slices of the chunks, without copying
// the bytes, and moves past them.
func (r *chunkReader) span(n uint64) ([][]byte, error) {
	if n > uint64(r.remaining()) {
		return nil, io.ErrUnexpectedEOF
	}
	var dst [][]byte
	for n > 0 {
		r.done()
		k := min(uint64(len(r.cur)), n)
		dst = append(dst, r.cur[:k])
		r.cur = r.cur[k:]
		n -= k
	}
	return dst, nil
}
