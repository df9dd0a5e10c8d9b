// Package h2relay relays gRPC calls between HTTP/2 connections frame by
// frame, without a gRPC stack in between: the proxy's fast path for plain
// unary calls.
//
// Why it exists: through grpc-go, every proxied call crosses four
// goroutine hand-offs (the server transport's reader to a stream worker,
// the worker to the upstream connection's writer, the upstream's reader
// back to the worker, the worker to the client connection's writer) and
// makes about 150 allocations, which on two cores cost more CPU per call
// than nginx's event loop. Here each connection has one reader
// goroutine, and it writes what it read straight to the other side's
// connection with a non-blocking write: a small call is read once and
// written once on each side, on the goroutine that read it.
//
// What it does per client stream:
//
//   - A small unary call (the Handler says which methods are) is read
//     whole (store and forward, as the proxy's gRPC path does), then the
//     Handler routes it: to an upstream Pool, or to Local. Its response is
//     relayed as it arrives, and the Handler hears how it ended (Done).
//   - A big one (over the 64 KiB a stream may send unasked) whose first
//     bytes name its model is routed from them (RouteEarly) and relayed
//     as it arrives, cut-through, the rest of it scanned as it passes (a
//     later model name that changes the target resets it). One the
//     Handler needs whole (batching, routes) is read whole under the
//     budget.
//   - Any other stream, and any call the Handler sends to Local, is relayed
//     as it arrives to the Local connection: the proxy's own grpc.Server,
//     which does everything the fast path does not (streams, batching,
//     routes, tracing, compression, oversize messages). Local connections
//     are socket pairs, one per client connection, opened when first
//     needed.
//
// The front door: whatever a client sends is bounded by what
// the relay grants, never by what the client wants.
//
//   - Flow control is the lever: every stream starts with a 64 KiB
//     window and gets more only as its data leaves for the other side
//     (widening, doubling, while it flows and the budget has room), or, for
//     a request read whole, its whole size at once from the budget
//     (package budget). So what the relay holds is the budget plus 64 KiB per
//     open stream, and a sender that meets a spent budget waits.
//   - Streams, connections and idle time have limits, and a client whose
//     wasted streams (Rapid Reset and its family) outrun its calls gets
//     GOAWAY ENHANCE_YOUR_CALM (limits.go). A request complete in the
//     frames read with its reset is never sent anywhere.
//   - A stream's error ends that stream: frames the client sent on a
//     stream the relay reset are ignored, and malformed requests get the
//     stream error RFC 9113 names, never a GOAWAY for their neighbours.
//
// The relay is two layers. Package h2codec is the HTTP/2 codec: frames,
// flow-control windows (its flow.go), stream states, HPACK, non-blocking
// writes and the read buffer; it knows nothing of gRPC. This package is
// the relay on top: which streams are read whole, routed, cut through,
// replayed or timed out, the front door's limits per connection, and the
// byte budget's share of each (package budget). It reads a request's
// model through the Handler's Scanner, knowing no message format.
package h2relay
