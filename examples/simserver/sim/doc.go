// Package sim is an in-process simulated model server: it speaks NVIDIA
// Triton's KServe v2 gRPC protocol and TensorFlow Serving's PredictionService
// for real, computes deterministic outputs, and behaves like a GPU server
// (a latency model with execution slots, a long tail, GPU telemetry under
// Triton's metric names). A token_stream model answers ModelStreamInfer
// like Triton's decoupled LLM backends: many responses per request, the
// last flagged triton_final_response.
//
// A Server is built from a Config (models, seed, clock and sleeper hooks),
// registers its services on a grpc.Server with RegisterGRPC, and serves its
// admin API (/metrics, /healthz, /api/v1/faults) from AdminHandler. Faults
// (slowdown, errors, hangs, fixed delays, stalls between a decoupled
// model's responses, dropped connections, answers with their top class
// flipped or perturbed by noise) are set per model, or per version, over
// that admin API or with SetFault, so proxies, alerts and benchmarks can
// be tested against a server that misbehaves on demand.
//
// The extension points are Config.Sleep (how simulated time passes; tests
// inject a fake), Config.Now (the clock used for statistics and GPU
// sampling) and the model list (DefaultModels or a YAML file read by
// LoadModels).
package sim
