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
// PredictionService, grpc.health.v1.Health/Check) are answered with one
// Invoke; everything else is pumped as a bidirectional stream.
//
// In front of the grpc.Server sits the relay (Relay, package h2relay),
// which owns the client connections: a plain unary call (nothing to do but
// forward it) is relayed frame by frame to the upstream and recorded by
// finish (fastpath.go); any other unary call is answered by handle on the
// relay's side of the connection (fastpath_serve.go); streams go on to the
// grpc.Server.
//
// One call, in the order its code runs, one decision per file:
//
//	fastpath.go  the relay's Route: forward, serve, or the grpc.Server
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
//
// # Where the time goes
//
// The fast path (fastpath.go, package h2relay) exists because of what
// follows: through grpc-go, the gRPC path below, a small call cost more CPU
// than nginx. Relayed frame by frame, the same call (8 callers, 1
// connection, 4 KiB, a busy machine) costs about 80-90 µs of CPU against
// nginx's 90-110 and the gRPC path's 140-170, and adds 34 allocations
// instead of 142 (TestProxyAllocBudget guards both). What is left is
// mostly the kernel: write syscalls are about 35% of the relay's CPU, one
// write per hop and direction, then frame reading, HPACK (headers are
// decoded and encoded again, each connection keeps its own table) and the
// recording. A 1 MiB call (1 MiB each way) costs it about 1.6-2 ms of CPU
// against 2.8-3.1 ms on the gRPC path: the request is read into one
// buffer sized from its length prefix and written from there, response
// frames are copied once, from the read buffer into the output buffer,
// and a connection whose reads fill its 64 KiB read buffer reads into a
// 512 KiB one until its reads are small again (h2relay's readbuf.go: 62
// syscalls per 1 MiB call instead of 100).
//
// The gRPC path, profiled on a 2-core machine (CPU, block, mutex, allocation profiles and
// a scheduler trace of a running infergate with --pprof; 8 callers on one
// connection, 4 KiB ModelInfer to simserver's identity_fp32, so the
// upstream costs next to nothing), the proxy spends about 125 µs of CPU
// per call (nginx grpc_pass, the same load at the same time: about 100):
//
//	write syscalls      22%  ~1.9 writes per call (one per hop and
//	                         direction; loopback TCP delivers to the
//	                         reader inside write, so this is most of the
//	                         kernel's work)
//	malloc + GC         14%  ~154 allocations per call then, 141 now
//	                         (guarded by TestProxyAllocBudget); see below
//	scheduler, futex    13%  four goroutine hand-offs per call (server
//	                         reader → handler → client writer, client
//	                         reader → handler → server writer)
//	read syscalls        6%  ~1.6 reads per call, plus epoll
//	HPACK                4%  headers and trailers, both hops
//	stack growth         2%  (11% before the server kept 64 idle stream
//	                         workers: new goroutines grew their stacks in
//	                         the upstream call)
//	recording            1%  the HDR sample and the series lookup
//
// The scheduler trace shows where latency (not CPU) goes: goroutines made
// runnable by a channel send wait for a core, most of the added latency at
// 8 callers on 2 cores. The block profile shows calls waiting only on the
// upstream; the mutex profile shows no contention worth a line.
//
// Allocations added to one small unary call (BenchmarkProxyUnary/128B
// less BenchmarkDirectUnary/128B): 141. The proxy's own code makes one
// (the request frame with its upstream exchange); the rest is grpc-go:
// about 55 in the upstream call (its client stream, contexts, retry
// buffer, the copies of the response header and trailer), about 15 in
// the handler's use of its server stream (6 of them FromIncomingContext's
// copy of the client's metadata, which is the only public way to read
// it), the rest in the two HTTP/2 transports (stream setup, HPACK header
// decoding). 154 before these were cut: no SetHeader for a header gRPC
// would not write (3), no empty outgoing metadata (2), one allocation for
// the response, header, trailer and call options (3), recovery in the
// handler instead of an interceptor (1), no per-call size options when the
// upstream's connections default to the same limit (2), the request frame
// and its exchange together (1), interned model names (1).
//
// Big messages cost what a second TCP hop costs. A 1 MiB call spends
// about 60% of the relay's CPU in read and write syscalls (in the kernel:
// copies into and out of socket buffers, TCP's send and receive path,
// wakeups) and 7% in memmove: the request into its buffer, response frames
// into the output buffer. Requests (and queued frames) go to the kernel by
// writev straight from their own memory, which halved memmove's share.
// Payloads are never decoded. bench overhead -byte-relay measures the
// floor: a TCP relay that parses nothing and moves bytes with splice(2)
// (bench/byterelay). On a 2-core machine where client, simserver and proxy
// share the cores and the model does no work, that relay keeps 0.66-0.79x
// of a direct connection's throughput at 1 MiB and 0.68-0.78x at 16 MiB;
// infergate keeps 0.59-0.71x and 0.61-0.69x, nginx 0.24-0.36x (three runs,
// 2026-12-03). What is left to take: the copy of the request into its
// buffer and that buffer's zeroing, and at 16 MiB the wait for the whole
// request before it is sent on (cut-through would give up retrying a
// refused stream with the request in hand).
package proxy
