package sim

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/proto/kservepb"
)

func simpleInputs() ([]int32, []int32) {
	a, b := make([]int32, 16), make([]int32, 16)
	for i := range a {
		a[i] = int32(i)
		b[i] = 1
	}
	return a, b
}

func simpleRequest(a, b []int32, raw bool) *kservepb.ModelInferRequest {
	req := &kservepb.ModelInferRequest{
		ModelName: "simple",
		Id:        "req-1",
		Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
		},
	}
	if raw {
		req.RawInputContents = [][]byte{rawInt32s(a), rawInt32s(b)}
	} else {
		req.Inputs[0].Contents = &kservepb.InferTensorContents{IntContents: a}
		req.Inputs[1].Contents = &kservepb.InferTensorContents{IntContents: b}
	}
	return req
}

func TestSimpleAddSub(t *testing.T) {
	h := start(t, Config{})
	a, b := simpleInputs()
	var sum, diff []int32
	for i := range a {
		sum = append(sum, a[i]+b[i])
		diff = append(diff, a[i]-b[i])
	}
	for _, raw := range []bool{true, false} {
		resp, err := h.ks.ModelInfer(context.Background(), simpleRequest(a, b, raw))
		if err != nil {
			t.Fatalf("raw=%v: %v", raw, err)
		}
		if resp.ModelName != "simple" || resp.ModelVersion != "1" || resp.Id != "req-1" {
			t.Errorf("raw=%v: header = %q %q %q", raw, resp.ModelName, resp.ModelVersion, resp.Id)
		}
		if len(resp.Outputs) != 2 || len(resp.RawOutputContents) != 2 {
			t.Fatalf("raw=%v: %d outputs, %d raw", raw, len(resp.Outputs), len(resp.RawOutputContents))
		}
		for i, want := range [][]int32{sum, diff} {
			out := resp.Outputs[i]
			if out.Contents != nil || out.Datatype != "INT32" || !slices.Equal(out.Shape, []int64{1, 16}) {
				t.Errorf("raw=%v: output %d = %v", raw, i, out)
			}
			if got := decodeInt32s(resp.RawOutputContents[i]); !slices.Equal(got, want) {
				t.Errorf("raw=%v: %s = %v, want %v", raw, out.Name, got, want)
			}
		}
	}
}

func TestSimpleRequestedOutputs(t *testing.T) {
	h := start(t, Config{})
	a, b := simpleInputs()
	req := simpleRequest(a, b, true)
	req.Outputs = []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT1"}, {Name: "OUTPUT0"}}
	resp, err := h.ks.ModelInfer(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Outputs) != 2 || resp.Outputs[0].Name != "OUTPUT1" || resp.Outputs[1].Name != "OUTPUT0" {
		t.Fatalf("outputs = %v", resp.Outputs)
	}
	if got := decodeInt32s(resp.RawOutputContents[0]); got[3] != 2 {
		t.Errorf("OUTPUT1[3] = %d, want 2", got[3])
	}
	req.Outputs = req.Outputs[:1]
	resp, err = h.ks.ModelInfer(context.Background(), req)
	if err != nil || len(resp.Outputs) != 1 || len(resp.RawOutputContents) != 1 {
		t.Fatalf("one output: %v, %v", resp, err)
	}
}

func TestSimpleValidation(t *testing.T) {
	h := start(t, Config{})
	a, b := simpleInputs()
	cases := []struct {
		name   string
		mutate func(*kservepb.ModelInferRequest)
		code   codes.Code
		msg    string
	}{
		{"unknown model", func(r *kservepb.ModelInferRequest) { r.ModelName = "nope" },
			codes.NotFound, "Request for unknown model: 'nope' is not found"},
		{"unknown version", func(r *kservepb.ModelInferRequest) { r.ModelVersion = "2" },
			codes.NotFound, "Request for unknown model: 'simple' version 2 is not found"},
		{"tf-only model", func(r *kservepb.ModelInferRequest) { r.ModelName = "half_plus_two" },
			codes.NotFound, "unknown model: 'half_plus_two'"},
		{"missing input", func(r *kservepb.ModelInferRequest) {
			r.Inputs = r.Inputs[:1]
			r.RawInputContents = r.RawInputContents[:1]
		}, codes.InvalidArgument, "expected 2 inputs but got 1 inputs for model 'simple'. Missing required input(s) ['INPUT1']"},
		{"wrong datatype", func(r *kservepb.ModelInferRequest) { r.Inputs[0].Datatype = "FP32" },
			codes.InvalidArgument, "inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'"},
		{"wrong shape", func(r *kservepb.ModelInferRequest) { r.Inputs[1].Shape = []int64{1, 8} },
			codes.InvalidArgument, "unexpected shape for input 'INPUT1' for model 'simple'. Expected [-1,16], got [1,8]"},
		{"batch too large", func(r *kservepb.ModelInferRequest) {
			r.Inputs[0].Shape = []int64{9, 16}
		}, codes.InvalidArgument, "inference request batch-size must be <= 8 for 'simple'"},
		{"raw size", func(r *kservepb.ModelInferRequest) { r.RawInputContents[0] = r.RawInputContents[0][:60] },
			codes.InvalidArgument, "unexpected total byte size 60 for input 'INPUT0', expecting 64"},
		{"raw and contents", func(r *kservepb.ModelInferRequest) {
			r.Inputs[0].Contents = &kservepb.InferTensorContents{IntContents: a}
		}, codes.InvalidArgument, "contents field must not be specified when using raw_input_contents"},
		{"unknown input", func(r *kservepb.ModelInferRequest) { r.Inputs[1].Name = "INPUT9" },
			codes.InvalidArgument, "unexpected inference input 'INPUT9' for model 'simple'"},
		{"unknown output", func(r *kservepb.ModelInferRequest) {
			r.Outputs = []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT7"}}
		}, codes.InvalidArgument, "unexpected inference output 'OUTPUT7' for model 'simple'"},
		{"typed count", func(r *kservepb.ModelInferRequest) {
			r.RawInputContents = nil
			r.Inputs[0].Contents = &kservepb.InferTensorContents{IntContents: a[:3]}
			r.Inputs[1].Contents = &kservepb.InferTensorContents{IntContents: b}
		}, codes.InvalidArgument, "unexpected number of elements 3 in contents for input 'INPUT0', expecting 16"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := simpleRequest(a, b, true)
			tc.mutate(req)
			_, err := h.ks.ModelInfer(context.Background(), req)
			wantCode(t, err, tc.code, tc.msg)
		})
	}
	// Validation failures of a known model count as failures with
	// reason OTHER, like Triton's.
	if got := h.srv.models["simple"].stats.failures[0].Load(); got != uint64(len(cases)-3) {
		t.Errorf("OTHER failures = %d, want %d", got, len(cases)-3)
	}
}
