// Package wire reads and rewrites the few fields infergate needs from raw
// KServe v2 and TF-Serving messages without unmarshalling them.
//
// The proxy forwards payloads as opaque frames; to label a measurement it
// only needs the model name and version (and to send a request to another
// model or version, only to replace them: the Rewrite functions), which
// sit in the first fields of every request message. The scanners here walk
// the protobuf wire format with google.golang.org/protobuf/encoding/protowire,
// skip every other field (tensor payloads included) by length, and follow
// proto3 semantics: for a repeated scalar field the last occurrence wins, and
// repeated occurrences of a message field are merged.
//
// Which function serves which message:
//
//   - ModelInferTarget, RewriteModelInferTarget:
//     inference.ModelInferRequest and every KServe v2 request whose name and
//     version are fields 1 and 2 (ModelMetadataRequest, ModelReadyRequest,
//     ModelConfigRequest, ModelStatisticsRequest).
//   - PredictTarget, RewritePredictTarget:
//     tensorflow.serving.PredictRequest and every TF-Serving request whose
//     ModelSpec is field 1 (GetModelMetadataRequest, ClassificationRequest,
//     RegressionRequest).
//   - ModelInferTargetChunks, PredictTargetChunks: the same scans for a
//     message held in several buffers, as gRPC receives a large one.
//   - TargetScanner: the same scans for a request body that is still
//     arriving (its gRPC framing included), fed chunk by chunk with O(1)
//     state, so that the proxy can route a request from its first bytes,
//     forward the rest as it passes, and still learn whether a later field
//     changed the target (cut-through).
//   - ModelInferConfidence, PredictConfidence: the responses
//     (inference.ModelInferResponse, tensorflow.serving.PredictResponse),
//     for cascade routing: how confident the small model that answered is
//     in one output tensor, read from its values without decoding the rest,
//     so the proxy can send a doubtful request on to a bigger model.
//   - ScanFeatures: what a ModelInferRequest or PredictRequest carried
//     (its bytes, rows, and each input's name, datatype and shape, never
//     the values), from the whole message or its first bytes, into a
//     fixed-size Features without allocating, for the size class on the
//     metrics, span attributes and slow-call records.
//   - ScanInferRequest, ScanStreamResponse (and their Chunks forms): the
//     two directions of a ModelStreamInfer stream, for its meter: a
//     request's model, version and id; a response's id, error, final flag
//     (triton_final_response) and whether it carries outputs, so that
//     the proxy can time each request's responses without
//     decoding the tensors.
package wire
