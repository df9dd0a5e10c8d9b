package sim

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// decodeKServe validates a request's inputs against the model as Triton
// does and returns them in the model's input order with the batch size.
func (m *model) decodeKServe(req *kservepb.ModelInferRequest) ([]tensor, int, error) {
	raw := req.RawInputContents
	if len(raw) > 0 {
		for _, in := range req.Inputs {
			if in.Contents != nil {
				return nil, 0, status.Errorf(codes.InvalidArgument,
					"contents field must not be specified when using raw_input_contents for '%s' for model '%s'", in.Name, m.cfg.Name)
			}
		}
		if len(raw) != len(req.Inputs) {
			return nil, 0, status.Errorf(codes.InvalidArgument,
				"unexpected number of raw inputs (%d), expecting %d for model '%s'", len(raw), len(req.Inputs), m.cfg.Name)
		}
	}
	out := make([]tensor, len(m.cfg.Inputs))
	seen := make([]bool, len(m.cfg.Inputs))
	batch := 0
	for i, in := range req.Inputs {
		idx := m.inputIndex(in.Name)
		if idx < 0 {
			return nil, 0, m.errUnknownInput(in.Name)
		}
		if seen[idx] {
			return nil, 0, status.Errorf(codes.InvalidArgument, "input '%s' is specified more than once for model '%s'", in.Name, m.cfg.Name)
		}
		seen[idx] = true
		spec := m.cfg.Inputs[idx]
		if in.Datatype != spec.Datatype {
			return nil, 0, status.Errorf(codes.InvalidArgument,
				"inference input '%s' data-type is '%s', but model '%s' expects '%s'", in.Name, in.Datatype, m.cfg.Name, spec.Datatype)
		}
		b, elems, err := m.checkShape(spec, in.Shape)
		if err != nil {
			return nil, 0, err
		}
		if batch != 0 && b != batch {
			return nil, 0, status.Errorf(codes.InvalidArgument, "inputs of model '%s' have different batch sizes", m.cfg.Name)
		}
		batch = b
		var data []byte
		if len(raw) > 0 {
			data = raw[i]
			if err := m.checkRawSize(spec, elems, len(data)); err != nil {
				return nil, 0, err
			}
		} else if data, err = m.contentsToRaw(spec, in.Contents, elems); err != nil {
			return nil, 0, err
		}
		out[idx] = tensor{shape: in.Shape, raw: data}
	}
	if len(req.Inputs) != len(m.cfg.Inputs) {
		var missing []string
		for i, ok := range seen {
			if !ok {
				missing = append(missing, m.cfg.Inputs[i].Name)
			}
		}
		return nil, 0, m.errMissing(len(req.Inputs), missing)
	}
	if err := m.checkInputs(out); err != nil {
		return nil, 0, err
	}
	return out, batch, nil
}

// contentsToRaw turns typed contents into the raw layout.
func (m *model) contentsToRaw(spec TensorSpec, c *kservepb.InferTensorContents, elems int) ([]byte, error) {
	switch spec.Datatype {
	case "INT32":
		v := c.GetIntContents()
		if err := m.checkCount(spec, elems, len(v)); err != nil {
			return nil, err
		}
		return int32sToRaw(v), nil
	default: // FP32, the only other datatype Validate allows.
		v := c.GetFp32Contents()
		if err := m.checkCount(spec, elems, len(v)); err != nil {
			return nil, err
		}
		return float32sToRaw(v), nil
	}
}

// kserveOutputs returns the indexes of the requested outputs in request
// order, or all outputs when none is requested.
func (m *model) kserveOutputs(req []*kservepb.ModelInferRequest_InferRequestedOutputTensor) ([]int, error) {
	if len(req) == 0 {
		all := make([]int, len(m.cfg.Outputs))
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	idx := make([]int, len(req))
	for i, o := range req {
		idx[i] = m.outputIndex(o.Name)
		if idx[i] < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "unexpected inference output '%s' for model '%s'", o.Name, m.cfg.Name)
		}
	}
	return idx, nil
}

// kserveConfig is the model's Triton ModelConfig.
func (m *model) kserveConfig() *kservepb.ModelConfig {
	cfg := &kservepb.ModelConfig{
		Name:         m.cfg.Name,
		Platform:     m.cfg.Platform,
		MaxBatchSize: int32(m.cfg.MaxBatch),
	}
	for _, ts := range m.cfg.Inputs {
		cfg.Input = append(cfg.Input, &kservepb.ModelInput{Name: ts.Name, DataType: configDataType(ts.Datatype), Dims: configDims(ts)})
	}
	for _, ts := range m.cfg.Outputs {
		cfg.Output = append(cfg.Output, &kservepb.ModelOutput{Name: ts.Name, DataType: configDataType(ts.Datatype), Dims: configDims(ts)})
	}
	group := &kservepb.ModelInstanceGroup{Name: m.cfg.Name, Count: int32(m.cfg.Slots), Kind: kservepb.ModelInstanceGroup_KIND_GPU, Gpus: []int32{0}}
	if m.cfg.Slots == 0 {
		// Unlimited concurrency is no GPU instance group; report one
		// CPU instance as Triton would for a lightweight backend.
		group = &kservepb.ModelInstanceGroup{Name: m.cfg.Name, Count: 1, Kind: kservepb.ModelInstanceGroup_KIND_CPU}
	}
	cfg.InstanceGroup = []*kservepb.ModelInstanceGroup{group}
	if m.cfg.PriorityLevels > 0 {
		cfg.SchedulingChoice = &kservepb.ModelConfig_DynamicBatching{DynamicBatching: &kservepb.ModelDynamicBatching{PriorityLevels: uint64(m.cfg.PriorityLevels),
			DefaultPriorityLevel: uint64((m.cfg.PriorityLevels + 1) / 2)}}
	}
	return cfg
}

// kserveStatistics is the model's Triton ModelStatistics.
func (m *model) kserveStatistics() *kservepb.ModelStatistics {
	st := &m.stats
	d := func(x *duration) *kservepb.StatisticDuration {
		return &kservepb.StatisticDuration{Count: x.count.Load(), Ns: x.ns.Load()}
	}
	return &kservepb.ModelStatistics{
		Name:           m.cfg.Name,
		Version:        "1",
		LastInference:  st.lastInferenceMS.Load(),
		InferenceCount: st.inferenceCount.Load(),
		ExecutionCount: st.execCount.Load(),
		InferenceStats: &kservepb.InferStatistics{
			Success:       d(&st.success),
			Fail:          d(&st.fail),
			Queue:         d(&st.queue),
			ComputeInput:  &kservepb.StatisticDuration{},
			ComputeInfer:  d(&st.computeInfer),
			ComputeOutput: &kservepb.StatisticDuration{},
			CacheHit:      &kservepb.StatisticDuration{},
			CacheMiss:     &kservepb.StatisticDuration{},
		},
	}
}

func configDataType(datatype string) kservepb.DataType {
	if datatype == "INT32" {
		return kservepb.DataType_TYPE_INT32
	}
	return kservepb.DataType_TYPE_FP32
}

// configDims are Triton's config dims: without the batch dimension, [-1]
// for any shape.
func configDims(ts TensorSpec) []int64 {
	if ts.AnyShape {
		return []int64{-1}
	}
	return ts.Dims
}

// fullShape is the metadata shape: a -1 batch dimension first when the
// model batches, [-1] for any shape.
func (m *model) fullShape(ts TensorSpec) []int64 {
	if ts.AnyShape {
		return []int64{-1}
	}
	if m.cfg.MaxBatch > 0 {
		return append([]int64{-1}, ts.Dims...)
	}
	return ts.Dims
}

func (m *model) inputIndex(name string) int {
	for i, ts := range m.cfg.Inputs {
		if ts.Name == name {
			return i
		}
	}
	return -1
}

func (m *model) outputIndex(name string) int {
	for i, ts := range m.cfg.Outputs {
		if ts.Name == name {
			return i
		}
	}
	return -1
}

// checkInputs applies the kind's cross-input rule: add_sub needs equal
// shapes (dims of -1 could otherwise differ).
func (m *model) checkInputs(in []tensor) error {
	if m.cfg.Kind == KindAddSub && formatShape(in[0].shape) != formatShape(in[1].shape) {
		return status.Errorf(codes.InvalidArgument, "inputs of model '%s' must have the same shape, got %s and %s",
			m.cfg.Name, formatShape(in[0].shape), formatShape(in[1].shape))
	}
	return nil
}
