// Package methods is the one table of the gRPC methods infergate knows:
// KServe v2 (Triton), TF-Serving's PredictionService and grpc.health.v1.
// For each it says whether it is unary, where its first request names the
// model, whether it runs a model on inputs (inference), and the layout of
// its input tensors. The proxy, the batcher, the alerts, the correlator and
// bench all read it, so they agree on what "an inference call" is.
//
// A method not in the table is a stream with no model name: the proxy
// forwards it as it is.
package methods

import (
	"slices"
	"strings"

	"github.com/infergate/infergate/proto/wire"
)

// The services' path prefixes, as in a full method name.
const (
	KServeService    = "/inference.GRPCInferenceService/"
	TFServingService = "/tensorflow.serving.PredictionService/"
	HealthService    = "/grpc.health.v1.Health/"
)

// Full names of the methods other packages name on their own.
const (
	ModelInfer       = KServeService + "ModelInfer"
	ModelStreamInfer = KServeService + "ModelStreamInfer"
	RepositoryIndex  = KServeService + "RepositoryIndex"
	ServerReady      = KServeService + "ServerReady"
	Predict          = TFServingService + "Predict"
	GetModelMetadata = TFServingService + "GetModelMetadata"
	HealthCheck      = HealthService + "Check"
)

// Info is what the table knows of one method.
type Info struct {
	// Known is true for a method in the table.
	Known bool
	// Unary is true for a method that takes and returns exactly one
	// message. Unknown methods are streams.
	Unary bool
	// Target says where the first request message names the model and
	// version (wire.ModelInferTarget or wire.PredictTarget); 0 when it
	// names none, or several (MultiInference).
	Target wire.TargetKind
	// Inference is true for a method that runs a model on a request: the
	// calls whose latency is a model's, and that a route may send to a
	// fallback model. Metadata, readiness and statistics calls are not.
	Inference bool
	// Inputs is the layout of the request's input tensors that
	// wire.ScanFeatures reads; 0 for a request without tensors (or one it
	// does not read).
	Inputs wire.TargetKind
}

// table is built once and read-only afterwards: lookups take no lock.
// order holds its names as they were added, KServe first.
var table, order = func() (map[string]Info, []string) {
	m := map[string]Info{}
	var order []string
	add := func(name string, info Info) {
		info.Known = true
		m[name] = info
		order = append(order, name)
	}
	// Every KServe v2 / Triton method is unary except ModelStreamInfer.
	add(ModelInfer, Info{Unary: true, Target: wire.KServeTarget, Inference: true, Inputs: wire.KServeTarget})
	add(ModelStreamInfer, Info{Target: wire.KServeTarget, Inference: true})
	for _, name := range []string{"ModelMetadata", "ModelReady", "ModelConfig", "ModelStatistics"} {
		add(KServeService+name, Info{Unary: true, Target: wire.KServeTarget})
	}
	for _, name := range []string{
		"ServerLive", "ServerReady", "ServerMetadata", "RepositoryIndex",
		"RepositoryModelLoad", "RepositoryModelUnload",
		"SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
		"CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister",
		"TraceSetting", "LogSettings",
	} {
		add(KServeService+name, Info{Unary: true})
	}
	// Every TF-Serving PredictionService method is unary.
	add(Predict, Info{Unary: true, Target: wire.TFServingTarget, Inference: true, Inputs: wire.TFServingTarget})
	for _, name := range []string{"Classify", "Regress"} {
		add(TFServingService+name, Info{Unary: true, Target: wire.TFServingTarget, Inference: true})
	}
	// MultiInference can name several models: no model label.
	add(TFServingService+"MultiInference", Info{Unary: true, Inference: true})
	add(GetModelMetadata, Info{Unary: true, Target: wire.TFServingTarget})
	add(HealthCheck, Info{Unary: true})
	return m, order
}()

// Lookup returns what the table knows of fullMethod
// ("/package.Service/Method"); the zero Info (a stream without a model
// name) for a method it does not know.
func Lookup(fullMethod string) Info { return table[fullMethod] }

// IsInference reports whether fullMethod runs a model on a request.
func IsInference(fullMethod string) bool { return table[fullMethod].Inference }

// Short returns the last element of a full method name
// ("/inference.GRPCInferenceService/ModelInfer" → "ModelInfer").
func Short(fullMethod string) string {
	if i := strings.LastIndexByte(fullMethod, '/'); i >= 0 {
		return fullMethod[i+1:]
	}
	return fullMethod
}

// InferenceNames returns the short names of the inference methods, KServe's
// first: what a selector or a PromQL regular expression over the method
// label matches when it means "inference".
func InferenceNames() []string { return inferenceNames[:len(inferenceNames):len(inferenceNames)] }

var inferenceNames = func() []string {
	var out []string
	for _, full := range order {
		if s := Short(full); table[full].Inference && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}()

// IsInferenceName reports whether short (a method's last path element) is
// one of InferenceNames: for readers that hold only a method label's tail.
func IsInferenceName(short string) bool { return slices.Contains(inferenceNames, short) }
