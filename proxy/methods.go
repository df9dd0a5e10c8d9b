package proxy

// targetKind says how to read the model name from a method's first request.
type targetKind uint8

const (
	targetNone    targetKind = iota // no single model in the request
	targetKServe                    // name/version as fields 1/2 (wire.ModelInferTarget)
	targetPredict                   // ModelSpec as field 1 (wire.PredictTarget)
)

// methodInfo is what the handler knows of a method before forwarding it.
type methodInfo struct {
	// unary is true for methods known to take and return exactly one
	// message; they use the fast path. Unknown methods are streams.
	unary  bool
	target targetKind
}

const (
	kservePrefix  = "/inference.GRPCInferenceService/"
	tfPrefix      = "/tensorflow.serving.PredictionService/"
	healthCheck   = "/grpc.health.v1.Health/Check"
	streamInferFM = kservePrefix + "ModelStreamInfer"
)

// methods lists the methods known to be unary, with where their model name
// is. Built once; read-only afterwards, so lookups need no lock.
var methods = func() map[string]methodInfo {
	m := map[string]methodInfo{healthCheck: {unary: true}}
	// Every KServe v2 / Triton method is unary except ModelStreamInfer.
	for _, name := range []string{
		"ServerLive", "ServerReady", "ServerMetadata", "RepositoryIndex",
		"RepositoryModelLoad", "RepositoryModelUnload",
		"SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
		"CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister",
		"TraceSetting", "LogSettings",
	} {
		m[kservePrefix+name] = methodInfo{unary: true}
	}
	for _, name := range []string{"ModelInfer", "ModelMetadata", "ModelReady", "ModelConfig", "ModelStatistics"} {
		m[kservePrefix+name] = methodInfo{unary: true, target: targetKServe}
	}
	// Every TF-Serving PredictionService method is unary. MultiInference
	// can name several models, so it gets no model label.
	for _, name := range []string{"Predict", "GetModelMetadata", "Classify", "Regress"} {
		m[tfPrefix+name] = methodInfo{unary: true, target: targetPredict}
	}
	m[tfPrefix+"MultiInference"] = methodInfo{unary: true}
	m[streamInferFM] = methodInfo{target: targetKServe}
	return m
}()

// lookupMethod returns what is known of fullMethod; the zero methodInfo
// (a stream without a model name) for an unknown one.
func lookupMethod(fullMethod string) methodInfo { return methods[fullMethod] }

// isInference reports whether a method runs a model on a request (the
// calls a route may send to a fallback model); metadata, readiness and
// statistics calls always go to the model the client named.
func isInference(fullMethod string) bool {
	switch fullMethod {
	case kservePrefix + "ModelInfer", streamInferFM, tfPrefix + "Predict", tfPrefix + "Classify", tfPrefix + "Regress":
		return true
	}
	return false
}
