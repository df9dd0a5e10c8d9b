package tensors

import (
	"encoding/binary"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func TestDecodeKServe(t *testing.T) {
	raw := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5))
	raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(-2))
	b, _ := proto.Marshal(&kservepb.ModelInferResponse{
		Outputs: []*kservepb.ModelInferResponse_InferOutputTensor{
			{Name: "a", Datatype: "FP32", Shape: []int64{1, 2}},
			{Name: "h", Datatype: "FP16", Shape: []int64{2}},
		},
		RawOutputContents: [][]byte{raw, {0x00, 0x3c, 0x00, 0xc0}}, // fp16 1.0, -2.0
	})
	ts, err := Decode(false, b)
	if err != nil || len(ts) != 2 {
		t.Fatal(ts, err)
	}
	if v := ts[0].Values; len(v) != 2 || v[0] != 1.5 || v[1] != -2 {
		t.Errorf("FP32: %v", v)
	}
	if v := ts[1].Values; len(v) != 2 || v[0] != 1 || v[1] != -2 {
		t.Errorf("FP16: %v", v)
	}
}

func TestDecodePredict(t *testing.T) {
	b, _ := proto.Marshal(&tfservingpb.PredictResponse{Outputs: map[string]*tensorflowpb.TensorProto{
		"y": {Dtype: tensorflowpb.DataType_DT_FLOAT, FloatVal: []float32{3, 4},
			TensorShape: &tensorflowpb.TensorShapeProto{Dim: []*tensorflowpb.TensorShapeProto_Dim{{Size: 2}}}},
	}})
	ts, err := Decode(true, b)
	if err != nil || len(ts) != 1 || ts[0].Name != "y" || len(ts[0].Values) != 2 || ts[0].Values[1] != 4 || ts[0].Shape[0] != 2 {
		t.Fatal(ts, err)
	}
}
