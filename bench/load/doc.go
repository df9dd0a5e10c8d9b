// Package load is a gRPC load generator for model servers speaking KServe v2
// (ModelInfer) or TF-Serving (Predict).
//
// A request is marshalled once into a Payload and then sent as raw bytes
// through a pass-through codec, so the generator spends its CPU on sending
// and timing rather than on protobuf encoding. Two modes exist:
//
//   - closed loop: Concurrency callers, each sending its next request when the
//     previous one completes (measures maximum throughput);
//   - open loop: requests follow an intended timeline at Rate per second with
//     fixed or Poisson gaps, and every latency is measured from the intended
//     send time (coordinated-omission correction, as in wrk2), so a stalled
//     server cannot hide its tail behind a stalled generator.
//
// With Config.Stream the requests go on KServe ModelStreamInfer streams to
// a decoupled model, and each request's responses are timed as infergate
// times them: the first response, the gaps between responses, their
// number (Result.Stream).
//
// Latencies go into HDR histograms (hdrhistogram-go); Run returns a Result
// with quantiles, throughput and errors counted by gRPC code name.
package load
