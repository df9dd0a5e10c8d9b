// Package proxy is infergate's transparent gRPC proxy: it accepts any call,
// known method or not, unary or streaming, forwards it frame by frame to an
// upstream model server (Triton over KServe v2, TF-Serving) and measures it.
//
// Payloads are never decoded on the way through: a raw codec (Codec) hands
// the received bytes to the upstream as they are. Only the first request
// frame of a model method is scanned, with proto/wire, for the model name
// and version that label the measurement. Metadata, response headers,
// trailers and the upstream's status (code, message, details) reach the
// other side unchanged; the client's deadline and cancellation reach the
// upstream.
//
// Extension points, each with a documented default:
//
//   - Director picks the upstream of each call (StaticDirector: one).
//   - Recorder receives one sample per call (nil: nothing measured).
//   - WithBatcher hands unary ModelInfer and Predict calls of batchable
//     models to a batcher.Batcher (nil: every call forwarded alone).
//   - WithLogger, WithLogRequests, WithMaxMsgSize.
//
// Known unary methods (KServe v2 except ModelStreamInfer, TF-Serving's
// PredictionService, grpc.health.v1.Health/Check) take a fast path with one
// Invoke; everything else is pumped as a bidirectional stream.
package proxy
