package merge

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	kpb "github.com/infergate/infergate/proto/kservepb"
)

func TestKServeRoundTripEveryDatatype(t *testing.T) {
	rowSets := [][]int{{1}, {2, 1}, {1, 3, 2, 1}}
	for _, dt := range kDatatypes {
		for _, raw := range []bool{true, false} {
			if !raw && (dt == "FP16" || dt == "BF16") {
				continue // FP16 and BF16 only travel raw
			}
			for _, forceRaw := range []bool{false, true} {
				name := fmt.Sprintf("%s/raw=%v/rawResponse=%v", dt, raw, forceRaw)
				t.Run(name, func(t *testing.T) {
					for _, rows := range rowSets {
						var reqs []*kpb.ModelInferRequest
						for i, r := range rows {
							reqs = append(reqs, kReq(fmt.Sprintf("id-%d", i), raw, 10*i,
								kTensor{"x", dt, []int64{int64(r), 2, 3}}))
						}
						kRoundTrip(t, reqs, forceRaw)
					}
				})
			}
		}
	}
}

func TestKServeRoundTripSeveralInputs(t *testing.T) {
	for _, raw := range []bool{true, false} {
		t.Run(fmt.Sprintf("raw=%v", raw), func(t *testing.T) {
			var reqs []*kpb.ModelInferRequest
			for i, r := range []int{3, 1, 4} {
				req := kReq(fmt.Sprintf("caller-%d", i), raw, i,
					kTensor{"INPUT0", "INT32", []int64{int64(r), 16}},
					kTensor{"names", "BYTES", []int64{int64(r)}},
					kTensor{"w", "FP64", []int64{int64(r), 2, 2}},
				)
				req.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0"}}
				reqs = append(reqs, req)
			}
			kRoundTrip(t, reqs, false)
			kRoundTrip(t, reqs, true)
		})
	}
}

func TestKServeRoundTripEmptyRowElements(t *testing.T) {
	// A [r, 0] tensor has rows but no elements; it must still split.
	for _, raw := range []bool{true, false} {
		reqs := []*kpb.ModelInferRequest{
			kReq("a", raw, 1, kTensor{"x", "FP32", []int64{2, 0}}, kTensor{"s", "BYTES", []int64{2, 0}}),
			kReq("b", raw, 2, kTensor{"x", "FP32", []int64{1, 0}}, kTensor{"s", "BYTES", []int64{1, 0}}),
		}
		kRoundTrip(t, reqs, false)
	}
}

func TestKServeMergedRequest(t *testing.T) {
	a := kReq("a", true, 1, kTensor{"x", "FP32", []int64{1, 2}})
	b := kReq("b", true, 2, kTensor{"x", "FP32", []int64{2, 2}})
	a.Parameters = map[string]*kpb.InferParameter{"priority": {ParameterChoice: &kpb.InferParameter_Int64Param{Int64Param: 2}}}
	b.Parameters = a.Parameters
	ia, _ := KServe.Parse(mustMarshal(t, a))
	ib, _ := KServe.Parse(mustMarshal(t, b))
	out, err := KServe.Merge([]*Item{ia, ib})
	if err != nil {
		t.Fatal(err)
	}
	want := &kpb.ModelInferRequest{
		ModelName: "m", ModelVersion: "1", Parameters: a.Parameters,
		Inputs:           []*kpb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 2}}},
		RawInputContents: [][]byte{append(append([]byte{}, a.RawInputContents[0]...), b.RawInputContents[0]...)},
	}
	got := new(kpb.ModelInferRequest)
	if err := proto.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("merged:\n got %v\nwant %v", got, want)
	}
}

// TestKServeMixedBatch runs the batcher's grouping on a mix of compatible,
// incompatible and malformed requests: groups by Key round-trip, the
// malformed one is rejected alone.
func TestKServeMixedBatch(t *testing.T) {
	bad := kReq("bad", true, 9, kTensor{"x", "FP32", []int64{2, 4}})
	bad.RawInputContents[0] = bad.RawInputContents[0][:5]
	reqs := []*kpb.ModelInferRequest{
		kReq("a1", true, 1, kTensor{"x", "FP32", []int64{1, 4}}),
		kReq("b1", true, 2, kTensor{"x", "FP32", []int64{1, 5}}), // other shape
		bad,
		kReq("a2", true, 3, kTensor{"x", "FP32", []int64{2, 4}}),
		kReq("c1", false, 4, kTensor{"x", "FP32", []int64{1, 4}}), // typed
		kReq("b2", true, 5, kTensor{"x", "FP32", []int64{3, 5}}),
		kReq("a3", true, 6, kTensor{"x", "FP32", []int64{1, 4}}),
	}
	groups := map[string][]*Item{}
	var order []string
	for _, r := range reqs {
		it, err := KServe.Parse(mustMarshal(t, r))
		if r == bad {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("malformed request: err = %v, want ErrInvalid", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if groups[it.Key] == nil {
			order = append(order, it.Key)
		}
		groups[it.Key] = append(groups[it.Key], it)
	}
	sizes := []int{}
	for _, k := range order {
		sizes = append(sizes, len(groups[k]))
		kCheckRoundTrip(t, groups[k], true)
	}
	if fmt.Sprint(sizes) != "[3 2 1]" {
		t.Errorf("group sizes %v, want [3 2 1]", sizes)
	}
}

func TestKServeKeys(t *testing.T) {
	base := func() *kpb.ModelInferRequest {
		r := kReq("id", true, 1, kTensor{"x", "FP32", []int64{2, 3}}, kTensor{"s", "BYTES", []int64{2}})
		r.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}
		return r
	}
	p := func(v int64) *kpb.InferParameter {
		return &kpb.InferParameter{ParameterChoice: &kpb.InferParameter_Int64Param{Int64Param: v}}
	}
	cases := []struct {
		name  string
		edit  func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest
		equal bool
	}{
		{"other rows and data", func(*kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r := kReq("other", true, 7, kTensor{"x", "FP32", []int64{5, 3}}, kTensor{"s", "BYTES", []int64{5}})
			r.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}
			return r
		}, true},
		{"other id", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest { r.Id = "zz"; return r }, true},
		{"model name", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest { r.ModelName = "n"; return r }, false},
		{"model version", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest { r.ModelVersion = "2"; return r }, false},
		{"shape beyond dim 0", func(*kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r := kReq("id", true, 1, kTensor{"x", "FP32", []int64{2, 4}}, kTensor{"s", "BYTES", []int64{2}})
			r.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}
			return r
		}, false},
		{"rank", func(*kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r := kReq("id", true, 1, kTensor{"x", "FP32", []int64{2, 3, 1}}, kTensor{"s", "BYTES", []int64{2}})
			r.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}
			return r
		}, false},
		{"datatype", func(*kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r := kReq("id", true, 1, kTensor{"x", "INT32", []int64{2, 3}}, kTensor{"s", "BYTES", []int64{2}})
			r.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}
			return r
		}, false},
		{"input name", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest { r.Inputs[0].Name = "x2"; return r }, false},
		{"input order", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r.Inputs[0], r.Inputs[1] = r.Inputs[1], r.Inputs[0]
			r.RawInputContents[0], r.RawInputContents[1] = r.RawInputContents[1], r.RawInputContents[0]
			return r
		}, false},
		{"representation", func(*kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r := kReq("id", false, 1, kTensor{"x", "FP32", []int64{2, 3}}, kTensor{"s", "BYTES", []int64{2}})
			r.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}
			return r
		}, false},
		{"requested outputs", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r.Outputs = append(r.Outputs, &kpb.ModelInferRequest_InferRequestedOutputTensor{Name: "z"})
			return r
		}, false},
		{"no requested outputs", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest { r.Outputs = nil; return r }, false},
		{"output parameter", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r.Outputs[0].Parameters = map[string]*kpb.InferParameter{"classification": p(3)}
			return r
		}, false},
		{"input parameter", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r.Inputs[0].Parameters = map[string]*kpb.InferParameter{"custom": p(1)}
			return r
		}, false},
		{"request priority", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r.Parameters = map[string]*kpb.InferParameter{"priority": p(1)}
			return r
		}, false},
		{"parameter kind", func(r *kpb.ModelInferRequest) *kpb.ModelInferRequest {
			r.Outputs[0].Parameters = map[string]*kpb.InferParameter{"classification": {ParameterChoice: &kpb.InferParameter_Uint64Param{Uint64Param: 3}}}
			return r
		}, false},
	}
	b, err := KServe.Parse(mustMarshal(t, base()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it, err := KServe.Parse(mustMarshal(t, tc.edit(base())))
			if err != nil {
				t.Fatal(err)
			}
			if (it.Key == b.Key) != tc.equal {
				t.Errorf("keys equal = %v, want %v", it.Key == b.Key, tc.equal)
			}
		})
	}
	// The same parameters in any map order give the same key.
	r1, r2 := base(), base()
	r1.Parameters = map[string]*kpb.InferParameter{"a": p(1), "b": p(2), "c": p(3)}
	r2.Parameters = map[string]*kpb.InferParameter{"c": p(3), "b": p(2), "a": p(1)}
	i1, _ := KServe.Parse(mustMarshal(t, r1))
	i2, _ := KServe.Parse(mustMarshal(t, r2))
	if i1.Key != i2.Key {
		t.Error("equal parameter maps give different keys")
	}
}

func TestKServeParseErrors(t *testing.T) {
	one := func(raw bool, dt string, shape ...int64) *kpb.ModelInferRequest {
		return kReq("id", raw, 1, kTensor{"x", dt, shape})
	}
	pInt := &kpb.InferParameter{ParameterChoice: &kpb.InferParameter_Int64Param{Int64Param: 7}}
	cases := []struct {
		name string
		req  func() []byte
		want error
	}{
		{"not protobuf", func() []byte { return []byte{0xff, 0xff, 0xff} }, ErrInvalid},
		{"no inputs", func() []byte { return mustMarshal(t, &kpb.ModelInferRequest{ModelName: "m"}) }, ErrInvalid},
		{"dim 0 differs", func() []byte {
			return mustMarshal(t, kReq("id", true, 1, kTensor{"a", "FP32", []int64{2, 2}}, kTensor{"b", "FP32", []int64{3, 2}}))
		}, ErrInvalid},
		{"raw too short", func() []byte {
			r := one(true, "FP32", 2, 2)
			r.RawInputContents[0] = r.RawInputContents[0][:15]
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"raw too long", func() []byte {
			r := one(true, "INT64", 2, 2)
			r.RawInputContents[0] = append(r.RawInputContents[0], 0)
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"raw BYTES truncated element", func() []byte {
			r := one(true, "BYTES", 3)
			r.RawInputContents[0] = append(r.RawInputContents[0], 9, 0, 0, 0, 'a')
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"raw BYTES too few elements", func() []byte {
			r := one(true, "BYTES", 3)
			r.Inputs[0].Shape = []int64{4}
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"raw count differs from inputs", func() []byte {
			r := one(true, "FP32", 1, 2)
			r.RawInputContents = append(r.RawInputContents, []byte{1})
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"raw and contents", func() []byte {
			r := one(true, "FP32", 1, 2)
			r.Inputs[0].Contents = &kpb.InferTensorContents{Fp32Contents: []float32{1, 2}}
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"typed count wrong", func() []byte {
			r := one(false, "INT32", 2, 2)
			r.Inputs[0].Contents.IntContents = r.Inputs[0].Contents.IntContents[:3]
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"typed field for other datatype", func() []byte {
			r := one(false, "INT32", 1, 2)
			r.Inputs[0].Contents = &kpb.InferTensorContents{Fp32Contents: []float32{1, 2}}
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"two typed fields", func() []byte {
			r := one(false, "INT32", 1, 2)
			r.Inputs[0].Contents.Fp32Contents = []float32{1, 2}
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"typed FP16", func() []byte {
			r := one(false, "FP32", 1, 2)
			r.Inputs[0].Datatype = "FP16"
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"typed without contents", func() []byte {
			r := one(false, "FP32", 1, 2)
			r.Inputs[0].Contents = nil
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"unknown datatype", func() []byte {
			r := one(true, "FP32", 1, 2)
			r.Inputs[0].Datatype = "FP8"
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"negative dimension", func() []byte {
			r := one(true, "FP32", 1, 2)
			r.Inputs[0].Shape = []int64{1, -2}
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"overflowing shape", func() []byte {
			r := one(true, "FP32", 1, 2)
			r.Inputs[0].Shape = []int64{1 << 40, 1 << 40}
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"duplicate input", func() []byte {
			return mustMarshal(t, kReq("id", true, 1, kTensor{"a", "FP32", []int64{1}}, kTensor{"a", "FP32", []int64{1}}))
		}, ErrInvalid},
		{"duplicate output", func() []byte {
			r := one(true, "FP32", 1, 2)
			r.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}, {Name: "y"}}
			return mustMarshal(t, r)
		}, ErrInvalid},
		{"scalar input", func() []byte { return mustMarshal(t, one(true, "FP32")) }, ErrUnbatchable},
		{"zero rows", func() []byte { return mustMarshal(t, one(true, "FP32", 0, 4)) }, ErrUnbatchable},
		{"sequence_id", func() []byte {
			r := one(true, "FP32", 1, 2)
			r.Parameters = map[string]*kpb.InferParameter{"sequence_id": pInt}
			return mustMarshal(t, r)
		}, ErrUnbatchable},
		{"shared memory input", func() []byte {
			r := &kpb.ModelInferRequest{ModelName: "m", Inputs: []*kpb.ModelInferRequest_InferInputTensor{{
				Name: "x", Datatype: "FP32", Shape: []int64{1, 2},
				Parameters: map[string]*kpb.InferParameter{"shared_memory_region": {ParameterChoice: &kpb.InferParameter_StringParam{StringParam: "r"}}},
			}}}
			return mustMarshal(t, r)
		}, ErrUnbatchable},
		{"shared memory output", func() []byte {
			r := one(true, "FP32", 1, 2)
			r.Outputs = []*kpb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y",
				Parameters: map[string]*kpb.InferParameter{"shared_memory_byte_size": pInt}}}
			return mustMarshal(t, r)
		}, ErrUnbatchable},
		{"unknown field", func() []byte {
			return append(mustMarshal(t, one(true, "FP32", 1, 2)), 0xf8, 0x01, 0x01) // field 31 varint
		}, ErrUnbatchable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it, err := KServe.Parse(tc.req())
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if it != nil {
				t.Error("item returned with error")
			}
		})
	}
}

func TestKServeSplitErrors(t *testing.T) {
	req := kReq("a", true, 1, kTensor{"x", "FP32", []int64{2, 3}})
	it, err := KServe.Parse(mustMarshal(t, req))
	if err != nil {
		t.Fatal(err)
	}
	items := []*Item{it, it}
	good := func() *kpb.ModelInferResponse {
		m, _ := KServe.Merge(items)
		merged := new(kpb.ModelInferRequest)
		_ = proto.Unmarshal(m, merged)
		return kModel(merged, true)
	}
	cases := []struct {
		name string
		edit func(r *kpb.ModelInferResponse) []byte
	}{
		{"not protobuf", func(*kpb.ModelInferResponse) []byte { return []byte{0x0a, 0xff} }},
		{"dim 0 too small", func(r *kpb.ModelInferResponse) []byte {
			r.Outputs[0].Shape = []int64{3, 3}
			r.RawOutputContents[0] = r.RawOutputContents[0][:36]
			return mustMarshal(t, r)
		}},
		{"dim 0 too large", func(r *kpb.ModelInferResponse) []byte {
			r.Outputs[0].Shape = []int64{5, 3}
			r.RawOutputContents[0] = append(r.RawOutputContents[0], make([]byte, 12)...)
			return mustMarshal(t, r)
		}},
		{"scalar output", func(r *kpb.ModelInferResponse) []byte { r.Outputs[0].Shape = nil; return mustMarshal(t, r) }},
		{"raw too short", func(r *kpb.ModelInferResponse) []byte {
			r.RawOutputContents[0] = r.RawOutputContents[0][:47]
			return mustMarshal(t, r)
		}},
		{"raw count", func(r *kpb.ModelInferResponse) []byte {
			r.RawOutputContents = append(r.RawOutputContents, nil)
			return mustMarshal(t, r)
		}},
		{"bad BYTES", func(r *kpb.ModelInferResponse) []byte {
			r.Outputs[0].Datatype = "BYTES"
			return mustMarshal(t, r)
		}},
		{"typed count", func(r *kpb.ModelInferResponse) []byte {
			r.RawOutputContents = nil
			r.Outputs[0].Contents = &kpb.InferTensorContents{Fp32Contents: make([]float32, 11)}
			return mustMarshal(t, r)
		}},
		{"typed wrong field", func(r *kpb.ModelInferResponse) []byte {
			r.RawOutputContents = nil
			r.Outputs[0].Contents = &kpb.InferTensorContents{IntContents: make([]int32, 12)}
			return mustMarshal(t, r)
		}},
		{"unknown datatype", func(r *kpb.ModelInferResponse) []byte {
			r.Outputs[0].Datatype = "X"
			return mustMarshal(t, r)
		}},
	}
	if _, err := KServe.Split(mustMarshal(t, good()), items); err != nil {
		t.Fatalf("good response: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parts, err := KServe.Split(tc.edit(good()), items)
			if !errors.Is(err, ErrSplit) {
				t.Fatalf("err = %v, want ErrSplit", err)
			}
			if parts != nil {
				t.Error("parts returned with error")
			}
		})
	}
}

func TestKServeMisuse(t *testing.T) {
	a, _ := KServe.Parse(mustMarshal(t, kReq("a", true, 1, kTensor{"x", "FP32", []int64{1, 3}})))
	b, _ := KServe.Parse(mustMarshal(t, kReq("b", true, 1, kTensor{"x", "FP32", []int64{1, 4}})))
	for name, items := range map[string][]*Item{
		"empty": nil, "different keys": {a, b}, "nil item": {a, nil},
	} {
		if _, err := KServe.Merge(items); err == nil {
			t.Errorf("Merge(%s): no error", name)
		}
		if _, err := KServe.Split(nil, items); err == nil {
			t.Errorf("Split(%s): no error", name)
		}
	}
}
