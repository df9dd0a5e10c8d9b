package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"
)

// Model kinds: what a model computes. The tensors a kind needs are checked
// by ModelConfig.Validate.
const (
	// KindAddSub is Triton's "simple": two INT32 inputs of the same shape,
	// outputs their sum and their difference.
	KindAddSub = "add_sub"
	// KindHalfPlusTwo is TF-Serving's "half_plus_two": one FP32 input x,
	// output 0.5·x + 2 of the same shape.
	KindHalfPlusTwo = "half_plus_two"
	// KindClassifier maps FP32 [N,F] to FP32 [N,C] probabilities with a
	// fixed pseudo-random F×C matrix (seeded by the model name) and a
	// softmax per row, so the same input always gives the same output.
	KindClassifier = "classifier"
	// KindIdentity returns its one input unchanged (same shape, same bytes).
	KindIdentity = "identity"
	// KindTokenStream is a decoupled model, as Triton's TensorRT-LLM and
	// vLLM backends are: it answers each ModelStreamInfer request with
	// many responses, one per generated token, the last flagged
	// triton_final_response (see ModelConfig.Stream), and refuses
	// ModelInfer as Triton does. Its one INT32 input of one element is
	// the number of responses (0 or less: Stream.Responses); its one
	// INT32 output of one element is the response's index.
	KindTokenStream = "token_stream"
)

// Protocols a model can be served on.
const (
	// ProtocolKServe is KServe v2 / Triton gRPC (inference.GRPCInferenceService).
	ProtocolKServe = "kserve"
	// ProtocolTFServing is TF-Serving gRPC (tensorflow.serving.PredictionService).
	ProtocolTFServing = "tfserving"
)

// Config configures a Server. The zero value serves DefaultModels with a
// real clock and real timers.
type Config struct {
	// Models to serve; nil means DefaultModels().
	Models []ModelConfig
	// Seed seeds the random choices (long-tail executions, error_rate
	// faults), so a run can be repeated. 0 is a valid seed.
	Seed uint64
	// Now is the clock for statistics and GPU accounting; nil means time.Now.
	Now func() time.Time
	// Sleep waits d of simulated time, returning ctx.Err() early if ctx
	// ends; nil means a real timer. Tests inject a fake to count or block
	// executions without waiting on the wall clock.
	Sleep func(ctx context.Context, d time.Duration) error
	// SampleInterval is the GPU telemetry period; 0 means one second and a
	// negative value starts no sampler (tests call SampleGPU themselves).
	SampleInterval time.Duration
	// Logger receives fault changes and shutdown; nil discards.
	Logger *slog.Logger
}

// ModelConfig describes one simulated model; it is also the YAML schema of
// a models file (see LoadModels).
type ModelConfig struct {
	// Name is the model name clients ask for.
	Name string `yaml:"name"`
	// Kind is what the model computes: add_sub, half_plus_two, classifier
	// or identity.
	Kind string `yaml:"kind"`
	// Platform is reported in metadata and config (e.g. "tensorrt_plan");
	// empty means "simserver".
	Platform string `yaml:"platform"`
	// Protocols lists where the model is served: kserve, tfserving.
	Protocols []string `yaml:"protocols"`
	// MaxBatch is Triton's max_batch_size: 0 means no batch dimension;
	// above 0 every input has a leading batch dimension of 1..MaxBatch
	// that Inputs' and Outputs' Dims leave out.
	MaxBatch int `yaml:"max_batch"`
	// Slots is the number of executions that run at once (Triton's
	// instance_group count); 0 means unlimited (no queue).
	Slots int `yaml:"slots"`
	// PriorityLevels is the dynamic batcher's priority_levels its
	// ModelConfig reports (0: none); the requests' priority parameter is
	// counted per level (simserver_requests_by_priority_total).
	PriorityLevels int `yaml:"priority_levels"`
	// Inputs and Outputs are the tensors, in order.
	Inputs  []TensorSpec `yaml:"inputs"`
	Outputs []TensorSpec `yaml:"outputs"`
	// Latency is the simulated compute time of one execution; for a
	// token_stream model, the time to its first response (prefill).
	Latency LatencyProfile `yaml:"latency"`
	// Stream paces a token_stream model's later responses; only for that
	// kind.
	Stream StreamProfile `yaml:"stream"`
	// Versions are the versions served at once (Triton's version policy
	// "all"), positive integers as TF-Serving wants them; empty means
	// ["1"]. They compute alike; a fault with a version slows or fails
	// one of them (a canary). A request without a version gets the
	// highest, as Triton's and TF-Serving's default policy does.
	Versions []string `yaml:"versions"`
}

// versions returns the versions served.
func (c *ModelConfig) versions() []string {
	if len(c.Versions) == 0 {
		return []string{"1"}
	}
	return c.Versions
}

// resolve returns the version a request for version v is served by (the
// highest for ""), and false when the model has no such version.
func (c *ModelConfig) resolve(v string) (string, bool) {
	vs := c.versions()
	if v == "" {
		best, bestN := vs[0], int64(-1)
		for _, x := range vs {
			if n, _ := strconv.ParseInt(x, 10, 64); n > bestN {
				best, bestN = x, n
			}
		}
		return best, true
	}
	for _, x := range vs {
		if x == v {
			return v, true
		}
	}
	return "", false
}

// StreamProfile is how a token_stream model answers a request after its
// first response.
type StreamProfile struct {
	// Responses is how many responses a request gets when it does not
	// say; at least 1.
	Responses int `yaml:"responses"`
	// TokenMS is the time between two responses (inter-token latency),
	// multiplied by a fault's slowdown and a throttled GPU like compute.
	TokenMS float64 `yaml:"token_ms"`
}

// TensorSpec describes one input or output tensor.
type TensorSpec struct {
	// Name of the tensor.
	Name string `yaml:"name"`
	// Datatype in KServe spelling: FP32 or INT32.
	Datatype string `yaml:"datatype"`
	// Dims without the batch dimension; -1 is a variable dimension.
	Dims []int64 `yaml:"dims"`
	// AnyShape accepts any rank and any dimensions (each at least 1);
	// Dims must then be empty and the model must not batch.
	AnyShape bool `yaml:"any_shape"`
}

// LatencyProfile is the simulated compute time of one execution:
// (BaseMS + PerItemMS·N) × slowdown × tail, where N is the batch size and
// tail is 1 except, with probability TailProbability, a factor drawn
// uniformly from [TailMinFactor, TailMaxFactor].
type LatencyProfile struct {
	BaseMS          float64 `yaml:"base_ms"`
	PerItemMS       float64 `yaml:"per_item_ms"`
	TailProbability float64 `yaml:"tail_probability"`
	TailMinFactor   float64 `yaml:"tail_min_factor"`
	TailMaxFactor   float64 `yaml:"tail_max_factor"`
}

// Duration is the compute time of a batch of n items under slowdown and a
// tail factor (1 for a normal execution).
func (p LatencyProfile) Duration(n int, slowdown, tail float64) time.Duration {
	ms := (p.BaseMS + p.PerItemMS*float64(n)) * slowdown * tail
	return time.Duration(ms * float64(time.Millisecond))
}

// zero reports whether the profile never takes time.
func (p LatencyProfile) zero() bool { return p.BaseMS == 0 && p.PerItemMS == 0 }

// Validate fills defaults (platform, tail factors) and reports every problem
// as "sim: model NAME: FIELD: reason", joined.
func (c *ModelConfig) Validate() error {
	if c.Platform == "" {
		c.Platform = "simserver"
	}
	p := &c.Latency
	if p.TailProbability > 0 && p.TailMinFactor == 0 && p.TailMaxFactor == 0 {
		p.TailMinFactor, p.TailMaxFactor = 4, 8
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("sim: model %q: %s: %s", c.Name, field, fmt.Sprintf(format, args...)))
	}
	if c.Name == "" || c.Name == "*" {
		bad("name", "must be set and not %q", "*")
	}
	if len(c.Protocols) == 0 {
		bad("protocols", "must list kserve and/or tfserving")
	}
	for _, proto := range c.Protocols {
		if proto != ProtocolKServe && proto != ProtocolTFServing {
			bad("protocols", "unknown protocol %q (want kserve or tfserving)", proto)
		}
	}
	if c.MaxBatch < 0 {
		bad("max_batch", "must be >= 0, got %d", c.MaxBatch)
	}
	if c.Slots < 0 {
		bad("slots", "must be >= 0, got %d", c.Slots)
	}
	if p.BaseMS < 0 || p.PerItemMS < 0 {
		bad("latency", "base_ms and per_item_ms must be >= 0")
	}
	if p.TailProbability < 0 || p.TailProbability > 1 {
		bad("latency.tail_probability", "must be in [0,1], got %v", p.TailProbability)
	}
	if p.TailProbability > 0 && (p.TailMinFactor < 1 || p.TailMaxFactor < p.TailMinFactor) {
		bad("latency.tail_min_factor", "need 1 <= tail_min_factor <= tail_max_factor")
	}
	for i, ts := range c.Inputs {
		errs = append(errs, c.validateTensor(fmt.Sprintf("inputs[%d]", i), ts)...)
	}
	for i, ts := range c.Outputs {
		errs = append(errs, c.validateTensor(fmt.Sprintf("outputs[%d]", i), ts)...)
	}
	seen := map[string]bool{}
	for i, v := range c.Versions {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 1 || strconv.FormatInt(n, 10) != v {
			bad(fmt.Sprintf("versions[%d]", i), "must be a positive integer without leading zeros, got %q", v)
		}
		if seen[v] {
			bad(fmt.Sprintf("versions[%d]", i), "%q is listed twice", v)
		}
		seen[v] = true
	}
	if err := c.validateKind(); err != nil {
		bad("kind", "%v", err)
	}
	switch {
	case c.Kind != KindTokenStream && c.Stream != (StreamProfile{}):
		bad("stream", "only for kind %s", KindTokenStream)
	case c.Kind == KindTokenStream && (c.Stream.Responses < 1 || c.Stream.TokenMS < 0):
		bad("stream", "responses must be >= 1 and token_ms >= 0, got %d and %v", c.Stream.Responses, c.Stream.TokenMS)
	}
	return errors.Join(errs...)
}

func (c *ModelConfig) validateTensor(field string, ts TensorSpec) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("sim: model %q: %s: %s", c.Name, field, fmt.Sprintf(format, args...)))
	}
	if ts.Name == "" {
		bad("name must be set")
	}
	if ts.Datatype != "FP32" && ts.Datatype != "INT32" {
		bad("datatype %q not supported (want FP32 or INT32)", ts.Datatype)
	}
	if ts.AnyShape && (len(ts.Dims) > 0 || c.MaxBatch > 0) {
		bad("any_shape needs empty dims and max_batch 0")
	}
	for _, d := range ts.Dims {
		if d == 0 || d < -1 {
			bad("dims must be >= 1 or -1, got %d", d)
		}
	}
	return errs
}

// validateKind checks that the tensors fit what the kind computes.
func (c *ModelConfig) validateKind() error {
	in, out := c.Inputs, c.Outputs
	switch c.Kind {
	case KindAddSub:
		if len(in) != 2 || len(out) != 2 {
			return errors.New("add_sub needs 2 inputs and 2 outputs")
		}
		for _, ts := range append(append([]TensorSpec{}, in...), out...) {
			if ts.Datatype != "INT32" || !sameDims(ts, in[0]) {
				return errors.New("add_sub tensors must all be INT32 with the same dims")
			}
		}
	case KindHalfPlusTwo, KindIdentity:
		if len(in) != 1 || len(out) != 1 {
			return fmt.Errorf("%s needs 1 input and 1 output", c.Kind)
		}
		if !sameDims(in[0], out[0]) || in[0].Datatype != out[0].Datatype {
			return fmt.Errorf("%s output must have the input's datatype and dims", c.Kind)
		}
		if c.Kind == KindHalfPlusTwo && in[0].Datatype != "FP32" {
			return errors.New("half_plus_two tensors must be FP32")
		}
	case KindClassifier:
		if len(in) != 1 || len(out) != 1 {
			return errors.New("classifier needs 1 input and 1 output")
		}
		if in[0].Datatype != "FP32" || out[0].Datatype != "FP32" {
			return errors.New("classifier tensors must be FP32")
		}
		if c.MaxBatch == 0 || len(in[0].Dims) != 1 || len(out[0].Dims) != 1 || in[0].Dims[0] < 1 || out[0].Dims[0] < 1 {
			return errors.New("classifier needs max_batch > 0 and fixed dims [F] in, [C] out")
		}
	case KindTokenStream:
		if len(in) != 1 || len(out) != 1 || in[0].Datatype != "INT32" || out[0].Datatype != "INT32" ||
			!slices.Equal(in[0].Dims, []int64{1}) || !slices.Equal(out[0].Dims, []int64{1}) {
			return errors.New("token_stream needs one INT32 input and one INT32 output, dims [1]")
		}
		if c.MaxBatch != 0 || !slices.Equal(c.Protocols, []string{ProtocolKServe}) {
			return errors.New("token_stream needs max_batch 0 and protocols [kserve] (ModelStreamInfer is KServe's)")
		}
	default:
		return fmt.Errorf("unknown kind %q (want add_sub, half_plus_two, classifier, identity or token_stream)", c.Kind)
	}
	return nil
}

func sameDims(a, b TensorSpec) bool {
	if a.AnyShape != b.AnyShape || len(a.Dims) != len(b.Dims) {
		return false
	}
	for i := range a.Dims {
		if a.Dims[i] != b.Dims[i] {
			return false
		}
	}
	return true
}

// serves reports whether the model is served on protocol.
func (c *ModelConfig) serves(protocol string) bool {
	for _, p := range c.Protocols {
		if p == protocol {
			return true
		}
	}
	return false
}
