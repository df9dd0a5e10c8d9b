package attack

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proto/kservepb"
)

// SimpleRequest is a valid ModelInferRequest for Triton's (and
// simserver's) model "simple": INPUT0 and INPUT1, INT32 [1,16], as raw
// contents.
func SimpleRequest() *kservepb.ModelInferRequest {
	a, b := make([]byte, 64), make([]byte, 64)
	for i := range 16 {
		binary.LittleEndian.PutUint32(a[4*i:], uint32(i))
		binary.LittleEndian.PutUint32(b[4*i:], uint32(2*i+1))
	}
	return &kservepb.ModelInferRequest{
		ModelName: "simple",
		Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
		},
		RawInputContents: [][]byte{a, b},
	}
}

// IdentityRequest is a ModelInferRequest of n bytes of FP32 (n rounded
// down to a multiple of 4) for an identity model such as simserver's
// identity_fp32, whose answer carries the same bytes back.
func IdentityRequest(model string, n int) *kservepb.ModelInferRequest {
	floats := n / 4
	raw := make([]byte, 4*floats)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	return &kservepb.ModelInferRequest{
		ModelName:        model,
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, int64(floats)}}},
		RawInputContents: [][]byte{raw},
	}
}

// marshal is m's protobuf encoding.
func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("attack: marshal %T: %v", m, err)) // a fixed, valid message
	}
	return b
}

// grpcMessage is msg as one uncompressed gRPC length-prefixed message.
func grpcMessage(msg []byte) []byte {
	out := make([]byte, grpcwire.PrefixLen+len(msg))
	grpcwire.PutPrefix(out, len(msg))
	copy(out[grpcwire.PrefixLen:], msg)
	return out
}
