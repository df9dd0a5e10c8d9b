package sim

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// Signature constants of the simulated SavedModels.
const (
	// DefaultSignature is the one signature every TF-Serving model has.
	DefaultSignature = "serving_default"
	// PredictMethod is the signature's method_name.
	PredictMethod = "tensorflow/serving/predict"
)

// tfService implements tensorflow.serving.PredictionService (Predict and
// GetModelMetadata; Classify, Regress and MultiInference answer
// UNIMPLEMENTED).
type tfService struct {
	tfservingpb.UnimplementedPredictionServiceServer
	s *Server
}

func (t *tfService) Predict(ctx context.Context, req *tfservingpb.PredictRequest) (*tfservingpb.PredictResponse, error) {
	s := t.s
	start := s.now()
	m, err := s.tfModel(req.ModelSpec)
	if err != nil {
		return nil, err
	}
	if sig := req.ModelSpec.SignatureName; sig != "" && sig != DefaultSignature {
		return nil, status.Errorf(codes.InvalidArgument, "Serving signature name: %q not found in signature def", sig)
	}
	in, batch, err := m.decodeTF(req.Inputs)
	var outIdx []int
	if err == nil {
		outIdx, err = m.tfOutputs(req.OutputFilter)
	}
	if err != nil {
		m.stats.recordFailure(ReasonOther, s.now().Sub(start))
		return nil, err
	}
	version := tfVersion(m, req.ModelSpec)
	f, err := s.execute(ctx, m, version, batch, start)
	if err != nil {
		return nil, err
	}
	outs := f.alter(m, m.compute(in))
	resp := &tfservingpb.PredictResponse{
		Outputs:   make(map[string]*tensorflowpb.TensorProto, len(outIdx)),
		ModelSpec: m.tfSpec(DefaultSignature, version),
	}
	for _, j := range outIdx {
		resp.Outputs[m.cfg.Outputs[j].Name] = m.tfTensor(m.cfg.Outputs[j], outs[j])
	}
	return resp, nil
}

func (t *tfService) GetModelMetadata(_ context.Context, req *tfservingpb.GetModelMetadataRequest) (*tfservingpb.GetModelMetadataResponse, error) {
	m, err := t.s.tfModel(req.ModelSpec)
	if err != nil {
		return nil, err
	}
	if len(req.MetadataField) == 0 {
		return nil, status.Error(codes.InvalidArgument, "GetModelMetadataRequest must specify at least one metadata_field")
	}
	resp := &tfservingpb.GetModelMetadataResponse{ModelSpec: m.tfSpec("", tfVersion(m, req.ModelSpec)), Metadata: map[string]*anypb.Any{}}
	for _, field := range req.MetadataField {
		if field != "signature_def" {
			return nil, status.Errorf(codes.InvalidArgument, "Metadata field %s is not supported", field)
		}
		sigs, err := anypb.New(&tfservingpb.SignatureDefMap{SignatureDef: map[string]*tensorflowpb.SignatureDef{
			DefaultSignature: m.signatureDef(),
		}})
		if err != nil {
			return nil, status.Errorf(codes.Internal, "simserver: pack signature_def: %v", err)
		}
		resp.Metadata[field] = sigs
	}
	return resp, nil
}

// tfModel finds a model served over TF-Serving, with TF-Serving's
// NOT_FOUND messages.
func (s *Server) tfModel(spec *tfservingpb.ModelSpec) (*model, error) {
	if spec == nil {
		return nil, status.Error(codes.InvalidArgument, "Missing ModelSpec")
	}
	m := s.lookup(spec.Name, ProtocolTFServing)
	if m == nil {
		return nil, status.Errorf(codes.NotFound, "Servable not found for request: Latest(%s)", spec.Name)
	}
	switch v := spec.VersionChoice.(type) {
	case *tfservingpb.ModelSpec_Version:
		if v.Version != nil && !hasVersion(m, strconv.FormatInt(v.Version.Value, 10)) {
			return nil, status.Errorf(codes.NotFound, "Servable not found for request: Specific(%s, %d)", spec.Name, v.Version.Value)
		}
	case *tfservingpb.ModelSpec_VersionLabel:
		if v.VersionLabel != "" {
			return nil, status.Errorf(codes.NotFound, "Unrecognized servable version label: %s", v.VersionLabel)
		}
	}
	return m, nil
}

// tfVersion returns the version a request tfModel accepted is served by.
func tfVersion(m *model, spec *tfservingpb.ModelSpec) string {
	asked := ""
	if v, ok := spec.VersionChoice.(*tfservingpb.ModelSpec_Version); ok && v.Version != nil {
		asked = strconv.FormatInt(v.Version.Value, 10)
	}
	version, _ := m.cfg.resolve(asked)
	return version
}

// tfSpec is the model_spec of a response: name, the version that
// answered (as TF-Serving fills it), signature.
func (m *model) tfSpec(signature, version string) *tfservingpb.ModelSpec {
	v, _ := strconv.ParseInt(version, 10, 64) // Validate allows positive integers only
	return &tfservingpb.ModelSpec{
		Name:          m.cfg.Name,
		VersionChoice: &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(v)},
		SignatureName: signature,
	}
}

// decodeTF validates Predict inputs against the signature as TF-Serving
// does and returns them in the model's input order with the batch size.
func (m *model) decodeTF(inputs map[string]*tensorflowpb.TensorProto) ([]tensor, int, error) {
	if err := m.checkTFInputNames(inputs); err != nil {
		return nil, 0, err
	}
	out := make([]tensor, len(m.cfg.Inputs))
	batch := 0
	for idx, spec := range m.cfg.Inputs {
		tp := inputs[spec.Name]
		if want := tfDataType(spec.Datatype); tp.Dtype != want {
			return nil, 0, status.Errorf(codes.InvalidArgument, "Expects arg[%d] to be %s but %s is provided",
				idx, tfTypeName(want), tfTypeName(tp.Dtype))
		}
		if tp.TensorShape.GetUnknownRank() {
			return nil, 0, status.Errorf(codes.InvalidArgument, "input '%s' has an unknown rank", spec.Name)
		}
		shape := make([]int64, len(tp.TensorShape.GetDim()))
		for i, d := range tp.TensorShape.GetDim() {
			shape[i] = d.Size
		}
		b, elems, err := m.checkShape(spec, shape)
		if err != nil {
			return nil, 0, err
		}
		if batch != 0 && b != batch {
			return nil, 0, status.Errorf(codes.InvalidArgument, "inputs of model '%s' have different batch sizes", m.cfg.Name)
		}
		batch = b
		var data []byte
		switch {
		case len(tp.TensorContent) > 0:
			data = tp.TensorContent
			err = m.checkRawSize(spec, elems, len(data))
		case spec.Datatype == "INT32":
			v := broadcast(tp.IntVal, elems)
			if err = m.checkCount(spec, elems, len(v)); err == nil {
				data = int32sToRaw(v)
			}
		default:
			v := broadcast(tp.FloatVal, elems)
			if err = m.checkCount(spec, elems, len(v)); err == nil {
				data = float32sToRaw(v)
			}
		}
		if err != nil {
			return nil, 0, err
		}
		out[idx] = tensor{shape: shape, raw: data}
	}
	if err := m.checkInputs(out); err != nil {
		return nil, 0, err
	}
	return out, batch, nil
}

// checkTFInputNames compares the sent input aliases with the signature's,
// with TF-Serving's message.
func (m *model) checkTFInputNames(inputs map[string]*tensorflowpb.TensorProto) error {
	var extra, missing []string
	for name, tp := range inputs {
		if m.inputIndex(name) < 0 || tp == nil {
			extra = append(extra, name)
		}
	}
	want := make([]string, len(m.cfg.Inputs))
	for i, spec := range m.cfg.Inputs {
		want[i] = spec.Name
		if inputs[spec.Name] == nil {
			missing = append(missing, spec.Name)
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return nil
	}
	sent := make([]string, 0, len(inputs))
	for name := range inputs {
		sent = append(sent, name)
	}
	sort.Strings(sent)
	sort.Strings(extra)
	sort.Strings(want)
	set := func(v []string) string { return "{" + strings.Join(v, ",") + "}" }
	return status.Errorf(codes.InvalidArgument,
		"input size does not match signature: %d!=%d len(%s) != len(%s). Sent extra: %s. Missing but required: %s.",
		len(inputs), len(want), set(sent), set(want), set(extra), set(missing))
}

// tfOutputs returns the indexes of the outputs named in output_filter, or
// all outputs when it is empty.
func (m *model) tfOutputs(filter []string) ([]int, error) {
	if len(filter) == 0 {
		all := make([]int, len(m.cfg.Outputs))
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	idx := make([]int, len(filter))
	for i, name := range filter {
		idx[i] = m.outputIndex(name)
		if idx[i] < 0 {
			names := make([]string, len(m.cfg.Outputs))
			for j, ts := range m.cfg.Outputs {
				names[j] = ts.Name
			}
			return nil, status.Errorf(codes.InvalidArgument,
				"output tensor alias not found in signature: %s Outputs expected to be in the set {%s}.", name, strings.Join(names, ","))
		}
	}
	return idx, nil
}

// tfTensor encodes an output. Identity answers with tensor_content (bytes
// copied through untouched); the other kinds use the typed *_val field, as
// TF-Serving does by default.
func (m *model) tfTensor(spec TensorSpec, t tensor) *tensorflowpb.TensorProto {
	tp := &tensorflowpb.TensorProto{Dtype: tfDataType(spec.Datatype), TensorShape: tfShape(t.shape)}
	switch {
	case m.cfg.Kind == KindIdentity:
		tp.TensorContent = t.raw
	case spec.Datatype == "INT32":
		tp.IntVal = rawToInt32s(t.raw)
	default:
		tp.FloatVal = rawToFloat32s(t.raw)
	}
	return tp
}

// signatureDef is the model's serving_default signature.
func (m *model) signatureDef() *tensorflowpb.SignatureDef {
	info := func(specs []TensorSpec) map[string]*tensorflowpb.TensorInfo {
		out := make(map[string]*tensorflowpb.TensorInfo, len(specs))
		for _, ts := range specs {
			ti := &tensorflowpb.TensorInfo{
				Encoding: &tensorflowpb.TensorInfo_Name{Name: ts.Name + ":0"},
				Dtype:    tfDataType(ts.Datatype),
			}
			if ts.AnyShape {
				ti.TensorShape = &tensorflowpb.TensorShapeProto{UnknownRank: true}
			} else {
				ti.TensorShape = tfShape(m.fullShape(ts))
			}
			out[ts.Name] = ti
		}
		return out
	}
	return &tensorflowpb.SignatureDef{Inputs: info(m.cfg.Inputs), Outputs: info(m.cfg.Outputs), MethodName: PredictMethod}
}

func tfShape(shape []int64) *tensorflowpb.TensorShapeProto {
	sp := &tensorflowpb.TensorShapeProto{Dim: make([]*tensorflowpb.TensorShapeProto_Dim, len(shape))}
	for i, d := range shape {
		sp.Dim[i] = &tensorflowpb.TensorShapeProto_Dim{Size: d}
	}
	return sp
}

func tfDataType(datatype string) tensorflowpb.DataType {
	if datatype == "INT32" {
		return tensorflowpb.DataType_DT_INT32
	}
	return tensorflowpb.DataType_DT_FLOAT
}

// tfTypeName spells a dtype as TensorFlow's messages do: "float", "int32".
func tfTypeName(dt tensorflowpb.DataType) string {
	return strings.ToLower(strings.TrimPrefix(fmt.Sprint(dt), "DT_"))
}
