// Package gpu reads GPU telemetry beside the latency that monitor measures:
// utilisation, memory, temperature, power, SM clock and clock event
// (throttle) reasons, per device UUID, and which model runs on which GPU.
//
// # Sources
//
// A Source reads every device once per call. Three come with the package:
//
//   - NVML (NewNVML) talks to the driver through github.com/NVIDIA/go-nvml,
//     for a proxy running on the GPU host. It needs cgo; a build with
//     CGO_ENABLED=0 or the nonvml tag has a stub whose Init fails with
//     ErrNVMLNotCompiled. When Init fails (no driver) the failure is logged
//     once and the source stays off: no other NVML function is ever called
//     after a failed Init, because go-nvml kills the process when one is.
//   - Scrape (NewScrape) fetches a Prometheus endpoint and parses it with
//     Prometheus' own text parser: Triton's nv_gpu_* gauges (label gpu_uuid)
//     and per-model nv_inference_* metrics (labels model, gpu_uuid, which give
//     the model-to-GPU map, and nv_inference_compute_infer_duration_us,
//     each model's compute time for cost attribution), DCGM exporter's DCGM_FI_* fields (label UUID),
//     or both on one endpoint, merged by UUID.
//   - simserver's simulated GPU exports Triton's and DCGM's names, so the
//     scrape source reads it unchanged. SourceFunc adapts any function.
//
// # Sampling
//
// A Sampler runs one Source off the request path: one goroutine, a ticker
// at the interval (default 1s), a timeout per sample. A sample that outlives
// its timeout is abandoned (and no second one starts while it runs), so a
// hung driver or a dead endpoint never blocks anything else. The latest
// reading sits behind an atomic pointer; readers never wait.
//
// A Hub joins the samplers of several sources and the configured model map
// into one State, and exports the infergate_gpu_* metrics (see Register).
package gpu
