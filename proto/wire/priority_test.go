package wire_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/wire"
)

func TestPriorityOf(t *testing.T) {
	req := func(params map[string]*kservepb.InferParameter) []byte {
		b, err := proto.Marshal(&kservepb.ModelInferRequest{ModelName: "m", Parameters: params,
			Inputs: []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name   string
		params map[string]*kservepb.InferParameter
		want   uint64
		ok     bool
	}{
		{"none", nil, 0, false},
		{"uint64", map[string]*kservepb.InferParameter{"priority": {ParameterChoice: &kservepb.InferParameter_Uint64Param{Uint64Param: 3}}}, 3, true},
		{"int64 beside others", map[string]*kservepb.InferParameter{
			"sequence_id": {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 9}},
			"priority":    {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 1}}}, 1, true},
		{"a string is not a level", map[string]*kservepb.InferParameter{"priority": {ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: "high"}}}, 0, false},
	}
	for _, c := range cases {
		got, ok := wire.PriorityOf(req(c.params))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.name, got, ok, c.want, c.ok)
		}
	}
	b := req(map[string]*kservepb.InferParameter{"priority": {ParameterChoice: &kservepb.InferParameter_Uint64Param{Uint64Param: 2}}})
	if n := testing.AllocsPerRun(100, func() { wire.PriorityOf(b) }); n != 0 {
		t.Errorf("%.0f allocations, want 0", n)
	}
	if _, ok := wire.PriorityOf([]byte{0xff, 0xff}); ok {
		t.Error("garbage read as a priority")
	}
}

// AppendPriority's request unmarshals with the level, its other
// parameters and tensors unchanged, and replaces a priority it carried.
func TestAppendPriority(t *testing.T) {
	in := &kservepb.ModelInferRequest{ModelName: "m", Id: "x",
		Parameters: map[string]*kservepb.InferParameter{
			"sequence_id": {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 9}},
			"priority":    {ParameterChoice: &kservepb.InferParameter_Uint64Param{Uint64Param: 7}}},
		RawInputContents: [][]byte{{1, 2, 3}}}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := wire.AppendPriority(b, 2)
	var got kservepb.ModelInferRequest
	if err := proto.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if p := got.Parameters["priority"].GetUint64Param(); p != 2 {
		t.Errorf("priority %d, want 2", p)
	}
	if got.ModelName != "m" || got.Parameters["sequence_id"].GetInt64Param() != 9 || string(got.RawInputContents[0]) != "\x01\x02\x03" {
		t.Errorf("the rest changed: %v", &got)
	}
	if p, ok := wire.PriorityOf(out); !ok || p != 2 {
		t.Errorf("PriorityOf: %d %v", p, ok)
	}
}
