package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
)

func TestSequenceOf(t *testing.T) {
	i64 := func(v int64) *kservepb.InferParameter {
		return &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: v}}
	}
	u64 := func(v uint64) *kservepb.InferParameter {
		return &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_Uint64Param{Uint64Param: v}}
	}
	str := func(v string) *kservepb.InferParameter {
		return &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: v}}
	}
	flag := func(v bool) *kservepb.InferParameter {
		return &kservepb.InferParameter{ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: v}}
	}
	for _, tc := range []struct {
		name   string
		params map[string]*kservepb.InferParameter
		want   Sequence
	}{
		{"none", nil, Sequence{}},
		{"int64 id, start", map[string]*kservepb.InferParameter{"sequence_id": i64(42), "sequence_start": flag(true)}, Sequence{Model: "m", ID: "42", Start: true}},
		{"uint64 id, end", map[string]*kservepb.InferParameter{"sequence_id": u64(1 << 63), "sequence_end": flag(true)}, Sequence{Model: "m", ID: "9223372036854775808", End: true}},
		{"string id", map[string]*kservepb.InferParameter{"sequence_id": str("user-7"), "priority": i64(3)}, Sequence{Model: "m", ID: "user-7"}},
		{"empty string id", map[string]*kservepb.InferParameter{"sequence_id": str("")}, Sequence{}},
		{"start false", map[string]*kservepb.InferParameter{"sequence_id": i64(1), "sequence_start": flag(false)}, Sequence{Model: "m", ID: "1"}},
	} {
		req := &kservepb.ModelInferRequest{ModelName: "m", Id: "r", Parameters: tc.params,
			Inputs: []*kservepb.ModelInferRequest_InferInputTensor{{Name: "in", Datatype: "FP32", Shape: []int64{1}}}, RawInputContents: [][]byte{{0, 0, 0, 0}}}
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := SequenceOf(b); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := SequenceOf([]byte{0x22, 0x7f, 1}); got != (Sequence{}) {
		t.Errorf("malformed: %+v", got)
	}
}
