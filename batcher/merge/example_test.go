package merge_test

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/batcher/merge"
	"github.com/infergate/infergate/proto/kservepb"
)

// Example shows the batcher's three steps for two KServe callers of a model
// with input "x" FP32 [N,2], answered raw the way Triton answers.
func Example() {
	call := func(id string, rows int64) []byte {
		b, _ := proto.Marshal(&kservepb.ModelInferRequest{
			ModelName: "m", Id: id,
			Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{rows, 2}}},
			RawInputContents: [][]byte{make([]byte, rows*2*4)},
		})
		return b
	}
	var items []*merge.Item
	for i, rows := range []int64{1, 3} {
		it, err := merge.KServe.Parse(call(fmt.Sprint("caller-", i), rows))
		if errors.Is(err, merge.ErrInvalid) || errors.Is(err, merge.ErrUnbatchable) {
			continue // answer INVALID_ARGUMENT, or send alone
		}
		items = append(items, it)
	}
	batched, _ := merge.KServe.Merge(items)
	req := new(kservepb.ModelInferRequest)
	_ = proto.Unmarshal(batched, req)
	fmt.Println("upstream shape:", req.Inputs[0].Shape)

	resp, _ := proto.Marshal(&kservepb.ModelInferResponse{
		ModelName:         "m",
		Outputs:           []*kservepb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{4, 1}}},
		RawOutputContents: [][]byte{make([]byte, 4*4)},
	})
	parts, _ := merge.KServe.Split(resp, items)
	for _, p := range parts {
		r := new(kservepb.ModelInferResponse)
		_ = proto.Unmarshal(p, r)
		fmt.Println(r.Id, r.Outputs[0].Shape, len(r.RawOutputContents[0]), "bytes")
	}
	// Output:
	// upstream shape: [4 2]
	// caller-0 [1 1] 4 bytes
	// caller-1 [3 1] 12 bytes
}
