package sim

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func tfSpec(name string) *tfservingpb.ModelSpec {
	return &tfservingpb.ModelSpec{Name: name, SignatureName: DefaultSignature}
}

func floatTensor(shape []int64, v []float32, content bool) *tensorflowpb.TensorProto {
	tp := &tensorflowpb.TensorProto{Dtype: tensorflowpb.DataType_DT_FLOAT, TensorShape: tfShape(shape)}
	if content {
		tp.TensorContent = rawFloats(v)
	} else {
		tp.FloatVal = v
	}
	return tp
}

func TestHalfPlusTwo(t *testing.T) {
	h := start(t, Config{})
	cases := []struct {
		name  string
		input *tensorflowpb.TensorProto
		want  []float32
		shape []int64
	}{
		{"float_val", floatTensor([]int64{3}, []float32{1, 2, 5}, false), []float32{2.5, 3, 4.5}, []int64{3}},
		{"tensor_content", floatTensor([]int64{2, 2}, []float32{0, 2, 4, -4}, true), []float32{2, 3, 4, 0}, []int64{2, 2}},
		{"broadcast float_val", floatTensor([]int64{2}, []float32{6}, false), []float32{5, 5}, []int64{2}},
		{"scalar", floatTensor(nil, []float32{10}, false), []float32{7}, []int64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := h.tf.Predict(context.Background(), &tfservingpb.PredictRequest{
				ModelSpec: tfSpec("half_plus_two"),
				Inputs:    map[string]*tensorflowpb.TensorProto{"x": tc.input},
			})
			if err != nil {
				t.Fatal(err)
			}
			y := resp.Outputs["y"]
			if y == nil || y.Dtype != tensorflowpb.DataType_DT_FLOAT || !slices.Equal(y.FloatVal, tc.want) {
				t.Fatalf("y = %v, want %v", y, tc.want)
			}
			var shape []int64
			for _, d := range y.TensorShape.GetDim() {
				shape = append(shape, d.Size)
			}
			if len(shape) != len(tc.shape) || !slices.Equal(shape, tc.shape) {
				t.Errorf("shape = %v, want %v", shape, tc.shape)
			}
			spec := resp.ModelSpec
			if spec.Name != "half_plus_two" || spec.GetVersion().GetValue() != 1 || spec.SignatureName != DefaultSignature {
				t.Errorf("model_spec = %v", spec)
			}
		})
	}
}

func TestPredictValidation(t *testing.T) {
	h := start(t, Config{})
	good := func() *tfservingpb.PredictRequest {
		return &tfservingpb.PredictRequest{
			ModelSpec: tfSpec("half_plus_two"),
			Inputs:    map[string]*tensorflowpb.TensorProto{"x": floatTensor([]int64{2}, []float32{1, 2}, false)},
		}
	}
	cases := []struct {
		name   string
		mutate func(*tfservingpb.PredictRequest)
		code   codes.Code
		msg    string
	}{
		{"unknown model", func(r *tfservingpb.PredictRequest) { r.ModelSpec.Name = "nope" },
			codes.NotFound, "Servable not found for request: Latest(nope)"},
		{"kserve-only model", func(r *tfservingpb.PredictRequest) { r.ModelSpec.Name = "simple" },
			codes.NotFound, "Latest(simple)"},
		{"unknown version", func(r *tfservingpb.PredictRequest) {
			r.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(3)}
		}, codes.NotFound, "Specific(half_plus_two, 3)"},
		{"signature", func(r *tfservingpb.PredictRequest) { r.ModelSpec.SignatureName = "other" },
			codes.InvalidArgument, `Serving signature name: "other" not found`},
		{"missing input", func(r *tfservingpb.PredictRequest) {
			r.Inputs = map[string]*tensorflowpb.TensorProto{"z": r.Inputs["x"]}
		}, codes.InvalidArgument, "Sent extra: {z}. Missing but required: {x}."},
		{"dtype", func(r *tfservingpb.PredictRequest) { r.Inputs["x"].Dtype = tensorflowpb.DataType_DT_INT32 },
			codes.InvalidArgument, "Expects arg[0] to be float but int32 is provided"},
		{"count", func(r *tfservingpb.PredictRequest) { r.Inputs["x"].FloatVal = []float32{1, 2, 3} },
			codes.InvalidArgument, "unexpected number of elements 3"},
		{"output filter", func(r *tfservingpb.PredictRequest) { r.OutputFilter = []string{"q"} },
			codes.InvalidArgument, "output tensor alias not found in signature: q"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := good()
			tc.mutate(req)
			_, err := h.tf.Predict(context.Background(), req)
			wantCode(t, err, tc.code, tc.msg)
		})
	}
}

func TestGetModelMetadata(t *testing.T) {
	h := start(t, Config{})
	resp, err := h.tf.GetModelMetadata(context.Background(), &tfservingpb.GetModelMetadataRequest{
		ModelSpec:     &tfservingpb.ModelSpec{Name: "half_plus_two"},
		MetadataField: []string{"signature_def"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ModelSpec.GetName() != "half_plus_two" || resp.ModelSpec.GetVersion().GetValue() != 1 {
		t.Errorf("model_spec = %v", resp.ModelSpec)
	}
	var sigs tfservingpb.SignatureDefMap
	if err := resp.Metadata["signature_def"].UnmarshalTo(&sigs); err != nil {
		t.Fatalf("unpack signature_def: %v", err)
	}
	sig := sigs.SignatureDef[DefaultSignature]
	if sig == nil || sig.MethodName != PredictMethod {
		t.Fatalf("signature = %v", sig)
	}
	x, y := sig.Inputs["x"], sig.Outputs["y"]
	if x.GetDtype() != tensorflowpb.DataType_DT_FLOAT || y.GetDtype() != tensorflowpb.DataType_DT_FLOAT || x.GetName() != "x:0" {
		t.Errorf("inputs %v outputs %v", sig.Inputs, sig.Outputs)
	}

	// A batched model's signature has a -1 batch dimension.
	resp, err = h.tf.GetModelMetadata(context.Background(), &tfservingpb.GetModelMetadataRequest{
		ModelSpec: &tfservingpb.ModelSpec{Name: "resnet50"}, MetadataField: []string{"signature_def"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Metadata["signature_def"].UnmarshalTo(&sigs); err != nil {
		t.Fatal(err)
	}
	dims := sigs.SignatureDef[DefaultSignature].Inputs["input"].TensorShape.Dim
	if len(dims) != 2 || dims[0].Size != -1 || dims[1].Size != 64 {
		t.Errorf("resnet50 input dims = %v", dims)
	}

	_, err = h.tf.GetModelMetadata(context.Background(), &tfservingpb.GetModelMetadataRequest{ModelSpec: &tfservingpb.ModelSpec{Name: "half_plus_two"}})
	wantCode(t, err, codes.InvalidArgument, "at least one metadata_field")
	_, err = h.tf.GetModelMetadata(context.Background(), &tfservingpb.GetModelMetadataRequest{
		ModelSpec: &tfservingpb.ModelSpec{Name: "half_plus_two"}, MetadataField: []string{"graph"}})
	wantCode(t, err, codes.InvalidArgument, "Metadata field graph is not supported")
}
