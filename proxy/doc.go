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
//
// One call, in the order its code runs, one decision per file:
//
//	handler.go   handle: the in-flight cap, the Director, the proxy's
//	             deadline; unary reads the request; finish records
//	pick.go      Router.Pick: the route, its reason, the targets (decide
//	             holds the one table of precedence)
//	routed.go    routeUnary: primary or fallback, breaker reports
//	hedge.go     a slow primary is asked of the fallback too
//	retry.go     a failed primary is retried on the fallback
//	cascade.go   edge first, the primary for unsure answers
//	attempt.go   call.attempt: one attempt to one target, batched or not
//	reply.go     reply: the one place a unary answer is written
//	stream.go    streams: their route, then two pumps
//	status.go    statusOf: the one place an error becomes a status
package proxy
