package load

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// Protocol selects the wire protocol of a target.
type Protocol int

const (
	// KServe is the KServe v2 / Triton GRPCInferenceService (ModelInfer).
	KServe Protocol = iota
	// TFServing is TensorFlow Serving's PredictionService (Predict).
	TFServing
)

// String returns the flag spelling of p: "kserve" or "tf".
func (p Protocol) String() string {
	if p == TFServing {
		return "tf"
	}
	return "kserve"
}

// ParseProtocol reads "kserve" (also "triton", "kserve2") or "tf" (also
// "tfserving").
func ParseProtocol(s string) (Protocol, error) {
	switch strings.ToLower(s) {
	case "kserve", "kserve2", "v2", "triton":
		return KServe, nil
	case "tf", "tfserving", "tf-serving":
		return TFServing, nil
	}
	return 0, fmt.Errorf("load: protocol %q: want kserve or tf", s)
}

// Tensor describes one request input; its contents are generated.
type Tensor struct {
	// Name is the input name, e.g. "INPUT0".
	Name string
	// Datatype is the KServe datatype name (FP32, INT32, ...); TF requests
	// use the matching DT_ enum.
	Datatype string
	// Shape is the tensor shape; every dimension must be positive.
	Shape []int64
}

// Payload is a request marshalled once and sent many times.
type Payload struct {
	// Method is the full gRPC method, e.g. "/inference.GRPCInferenceService/ModelInfer".
	Method string
	// Model is the model name in the request, for reports.
	Model string
	// Body is the marshalled request message; it is shared and never modified.
	Body []byte
}

// dtype holds what a KServe datatype name means in bytes and in TF terms.
type dtype struct {
	size int
	tf   tensorflowpb.DataType
}

var dtypes = map[string]dtype{
	"BOOL":   {1, tensorflowpb.DataType_DT_BOOL},
	"UINT8":  {1, tensorflowpb.DataType_DT_UINT8},
	"INT8":   {1, tensorflowpb.DataType_DT_INT8},
	"UINT16": {2, tensorflowpb.DataType_DT_UINT16},
	"INT16":  {2, tensorflowpb.DataType_DT_INT16},
	"FP16":   {2, tensorflowpb.DataType_DT_HALF},
	"BF16":   {2, tensorflowpb.DataType_DT_BFLOAT16},
	"UINT32": {4, tensorflowpb.DataType_DT_UINT32},
	"INT32":  {4, tensorflowpb.DataType_DT_INT32},
	"FP32":   {4, tensorflowpb.DataType_DT_FLOAT},
	"UINT64": {8, tensorflowpb.DataType_DT_UINT64},
	"INT64":  {8, tensorflowpb.DataType_DT_INT64},
	"FP64":   {8, tensorflowpb.DataType_DT_DOUBLE},
}

// ModelDefaults returns the inputs that simserver's known models expect, so
// the CLI needs only -model for them. ok is false for an unknown model.
func ModelDefaults(model string) (inputs []Tensor, ok bool) {
	switch model {
	case "simple":
		return []Tensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
		}, true
	case "half_plus_two":
		return []Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 16}}}, true
	case "resnet50", "mobilenet_v3":
		return []Tensor{{Name: "input", Datatype: "FP32", Shape: []int64{1, 64}}}, true
	case "identity_fp32":
		return []Tensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, 1024}}}, true
	case "llm_stream":
		// A zero max_tokens (what fill writes) asks for the model's
		// default number of responses.
		return []Tensor{{Name: "max_tokens", Datatype: "INT32", Shape: []int64{1}}}, true
	}
	return nil, false
}

// ParseShape reads a shape written as "1,16" or "1x16".
func ParseShape(s string) ([]int64, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == 'x' || r == ' ' })
	if len(fields) == 0 {
		return nil, fmt.Errorf("load: shape %q: empty", s)
	}
	shape := make([]int64, len(fields))
	for i, f := range fields {
		d, err := strconv.ParseInt(f, 10, 64)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("load: shape %q: dimension %q must be a positive integer", s, f)
		}
		shape[i] = d
	}
	return shape, nil
}

// ByteSize returns the size of t's contents in bytes.
func (t Tensor) ByteSize() (int, error) {
	dt, ok := dtypes[strings.ToUpper(t.Datatype)]
	if !ok {
		return 0, fmt.Errorf("load: input %q: unsupported datatype %q", t.Name, t.Datatype)
	}
	n := int64(1)
	for _, d := range t.Shape {
		if d <= 0 {
			return 0, fmt.Errorf("load: input %q: dimension %d must be positive", t.Name, d)
		}
		n *= d
		if n > math.MaxInt32 {
			return 0, fmt.Errorf("load: input %q: shape %v too large", t.Name, t.Shape)
		}
	}
	return int(n) * dt.size, nil
}

// fill makes deterministic contents for t: small integers, or small floats
// for FP32/FP64 (never NaN), so any model accepts them.
func (t Tensor) fill() ([]byte, error) {
	size, err := t.ByteSize()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	switch strings.ToUpper(t.Datatype) {
	case "FP32":
		for i := 0; i+4 <= size; i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(float32(i/4%100)/10))
		}
	case "FP64":
		for i := 0; i+8 <= size; i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], math.Float64bits(float64(i/8%100)/10))
		}
	case "INT32", "UINT32":
		for i := 0; i+4 <= size; i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], uint32(i/4%100))
		}
	case "BOOL":
		for i := range buf {
			buf[i] = byte(i % 2)
		}
	default:
		for i := range buf {
			buf[i] = byte(i % 100)
		}
	}
	return buf, nil
}

// NewPayload marshals one request for model with the given inputs. KServe
// requests carry the data in raw_input_contents; TF requests in
// tensor_content with signature "serving_default".
func NewPayload(p Protocol, model string, inputs []Tensor) (*Payload, error) {
	if model == "" {
		return nil, fmt.Errorf("load: payload: empty model name")
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("load: payload %q: no inputs", model)
	}
	var msg proto.Message
	var method string
	switch p {
	case KServe:
		req := &kservepb.ModelInferRequest{ModelName: model}
		for _, t := range inputs {
			data, err := t.fill()
			if err != nil {
				return nil, err
			}
			req.Inputs = append(req.Inputs, &kservepb.ModelInferRequest_InferInputTensor{
				Name: t.Name, Datatype: strings.ToUpper(t.Datatype), Shape: t.Shape,
			})
			req.RawInputContents = append(req.RawInputContents, data)
		}
		msg, method = req, kservepb.GRPCInferenceService_ModelInfer_FullMethodName
	case TFServing:
		req := &tfservingpb.PredictRequest{
			ModelSpec: &tfservingpb.ModelSpec{Name: model, SignatureName: "serving_default"},
			Inputs:    make(map[string]*tensorflowpb.TensorProto, len(inputs)),
		}
		for _, t := range inputs {
			data, err := t.fill()
			if err != nil {
				return nil, err
			}
			shape := &tensorflowpb.TensorShapeProto{}
			for _, d := range t.Shape {
				shape.Dim = append(shape.Dim, &tensorflowpb.TensorShapeProto_Dim{Size: d})
			}
			req.Inputs[t.Name] = &tensorflowpb.TensorProto{
				Dtype: dtypes[strings.ToUpper(t.Datatype)].tf, TensorShape: shape, TensorContent: data,
			}
		}
		msg, method = req, tfservingpb.PredictionService_Predict_FullMethodName
	default:
		return nil, fmt.Errorf("load: payload: unknown protocol %d", int(p))
	}
	// Deterministic so that the same flags always send the same bytes.
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("load: payload %q: marshal: %w", model, err)
	}
	return &Payload{Method: method, Model: model, Body: body}, nil
}
