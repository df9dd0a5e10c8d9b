package load_test

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func TestNewPayloadKServe(t *testing.T) {
	in, _ := load.ModelDefaults("simple")
	pl, err := load.NewPayload(load.KServe, "simple", in)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Method != "/inference.GRPCInferenceService/ModelInfer" || pl.Model != "simple" {
		t.Errorf("method %q model %q", pl.Method, pl.Model)
	}
	var req kservepb.ModelInferRequest
	if err := proto.Unmarshal(pl.Body, &req); err != nil {
		t.Fatal(err)
	}
	if req.GetModelName() != "simple" || len(req.GetInputs()) != 2 || len(req.GetRawInputContents()) != 2 {
		t.Fatalf("request = %v", &req)
	}
	for i, name := range []string{"INPUT0", "INPUT1"} {
		got := req.GetInputs()[i]
		if got.GetName() != name || got.GetDatatype() != "INT32" || !slices.Equal(got.GetShape(), []int64{1, 16}) || got.GetContents() != nil {
			t.Errorf("input %d = %v", i, got)
		}
		if n := len(req.GetRawInputContents()[i]); n != 64 {
			t.Errorf("raw input %d has %d bytes, want 64", i, n)
		}
	}
}

func TestNewPayloadTF(t *testing.T) {
	pl, err := load.NewPayload(load.TFServing, "identity_fp32", []load.Tensor{{Name: "INPUT0", Datatype: "fp32", Shape: []int64{1, 262144}}})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Method != "/tensorflow.serving.PredictionService/Predict" {
		t.Errorf("method %q", pl.Method)
	}
	if len(pl.Body) < 1<<20 || len(pl.Body) > 1<<20+100 {
		t.Errorf("body is %d bytes, want just over 1 MiB", len(pl.Body))
	}
	var req tfservingpb.PredictRequest
	if err := proto.Unmarshal(pl.Body, &req); err != nil {
		t.Fatal(err)
	}
	if req.GetModelSpec().GetName() != "identity_fp32" || req.GetModelSpec().GetSignatureName() != "serving_default" {
		t.Errorf("model spec = %v", req.GetModelSpec())
	}
	tp := req.GetInputs()["INPUT0"]
	if tp.GetDtype() != tensorflowpb.DataType_DT_FLOAT || len(tp.GetTensorShape().GetDim()) != 2 || tp.GetTensorShape().GetDim()[1].GetSize() != 262144 {
		t.Fatalf("tensor = dtype %v shape %v", tp.GetDtype(), tp.GetTensorShape())
	}
	c := tp.GetTensorContent()
	for i := 0; i < len(c); i += 4 {
		if f := math.Float32frombits(binary.LittleEndian.Uint32(c[i:])); math.IsNaN(float64(f)) || f < 0 || f >= 10 {
			t.Fatalf("element %d = %v, want a small float", i/4, f)
		}
	}
}

func TestNewPayloadErrors(t *testing.T) {
	cases := []struct {
		name   string
		model  string
		inputs []load.Tensor
	}{
		{"no model", "", []load.Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{1}}}},
		{"no inputs", "m", nil},
		{"bad dtype", "m", []load.Tensor{{Name: "x", Datatype: "FP8", Shape: []int64{1}}}},
		{"zero dim", "m", []load.Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 0}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := load.NewPayload(load.KServe, tc.model, tc.inputs); err == nil {
				t.Error("NewPayload accepted bad input")
			}
		})
	}
}

func TestParseShape(t *testing.T) {
	cases := []struct {
		in   string
		want []int64
		err  bool
	}{
		{"1,16", []int64{1, 16}, false},
		{"1x262144", []int64{1, 262144}, false},
		{"64", []int64{64}, false},
		{"", nil, true},
		{"1,-1", nil, true},
		{"a", nil, true},
	}
	for _, tc := range cases {
		got, err := load.ParseShape(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseShape(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestParseProtocolAndArrival(t *testing.T) {
	for in, want := range map[string]load.Protocol{"kserve": load.KServe, "triton": load.KServe, "tf": load.TFServing, "TFServing": load.TFServing} {
		if got, err := load.ParseProtocol(in); err != nil || got != want {
			t.Errorf("ParseProtocol(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := load.ParseProtocol("http"); err == nil {
		t.Error("ParseProtocol accepted http")
	}
	if a, err := load.ParseArrival("poisson"); err != nil || a != load.Poisson || a.String() != "poisson" {
		t.Errorf("ParseArrival(poisson) = %v, %v", a, err)
	}
	if _, err := load.ParseArrival("burst"); err == nil {
		t.Error("ParseArrival accepted burst")
	}
}
