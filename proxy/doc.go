// Package proxy is infergate's transparent gRPC proxy: it accepts any call,
// known method or not, unary or streaming, forwards it to an upstream
// model server (Triton over KServe v2, TF-Serving) and measures it.
//
// Payloads are never decoded on the way through: a raw codec (Codec) hands
// the received bytes to the upstream as they are. Only the first request
// message of a model method is scanned, with proto/wire, for the model
// name and version that label the measurement. Metadata, response
// headers, trailers and the upstream's status (code, message, details)
// reach the other side unchanged; the client's deadline and cancellation
// reach the upstream.
//
// Extension points, each with a documented default:
//
//   - Director picks the upstream of each call (StaticDirector: one).
//   - Recorder receives one sample per call (nil: nothing measured).
//   - WithBatcher hands unary ModelInfer and Predict calls of batchable
//     models to a batcher.Batcher (nil: every call forwarded alone).
//   - WithRouter routes the inference calls of the models it knows.
//   - WithLogger, WithLogRequests, WithMaxMsgSize, WithFrontDoor.
//
// Every call runs through one pipeline (pipeline.go), whichever side of
// the proxy read it: the relay (Relay, package h2relay), which owns the
// client connections, or the grpc.Server behind it (NewServer), which
// gets streams and the calls the relay hands on. docs/architecture.md
// follows one call of each kind through the files:
//
//	pipeline.go  sendWay (forward, serve or hand on: the one place),
//	             admit, timeoutFor, timeoutVerdict; serveCall, the pipeline of a
//	             call answered here
//	handle.go    what an attempt takes (a flow turn, an endpoint) and
//	             gives back once, on either door
//	fastpath.go  the relay's Handler: does what sendWay says; records
//	             forwarded calls
//	fastpath_serve.go  a served call's side on the relay (relaySide)
//	handler.go   grpc-go's side (handle); unary reads the request;
//	             recordCall records
//	routed.go    routeUnary: the router's Pick (package route: the
//	             route, its reason, the targets), then primary or
//	             fallback, breaker reports
//	hedge.go     a slow primary is asked of the fallback too, after the
//	             router's Patience
//	retry.go     a failed primary is retried on the fallback
//	cascade.go   edge first, the primary for unsure answers
//	attempt.go   call.attempt: one attempt to one target, batched or not
//	reply.go     reply: the one place a unary answer is written
//	stream.go    streams: their route, then two pumps
//	status.go    statusOf: the one place an error becomes a status
//
// What each path costs, and the profiles behind it, are in
// docs/benchmarks.md.
package proxy
