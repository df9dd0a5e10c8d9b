// Package correlate answers the first question on call when p99 rises: is
// it the GPU? Every interval (default 1s) a Correlator samples, per model,
// the p99 of its recent calls (total and queue time, over the last few
// monitor slices) and the state of the GPU the model runs on; over rolling
// rings of 60 and 300 samples (1m and 5m at the default interval) it keeps
// the Pearson correlation between the model's p99 and its GPU's
// utilisation, a latency baseline, and a cause hint.
//
// # Latency up
//
// A model's latency is up when its recent p99, or its recent p50, is at
// least UpFactor (1.5) times its baseline and at least MinRise (1ms) above
// it. The median counts too because with few calls per window p99 is the
// slowest call, and one slow call in the baseline could hide a rise that
// moves every call. A baseline is the median, over the samples in the long
// ring that were not themselves up, of the recent p99 (or p50), so a rise
// does not drag its own baseline along; when a model has been up for so
// long that fewer than 10 calm samples remain, the median of every sample
// there is taken instead, so a new normal is accepted after about five
// minutes. Until 10 samples with calls exist there is no baseline and
// latency is not up.
//
// # Cause hints
//
// Hint maps a Signal to one of the Hint* names, first match wins:
//
//  1. none: latency is not up.
//  2. unknown: no GPU data for the model (no source, source down, model
//     not mapped to a GPU the sources read).
//  3. gpu_throttled: a thermal, power or hardware slowdown reason is
//     active and the SM clock is below its maximum.
//  4. gpu_memory_pressure: used/total GPU memory is at least 0.95.
//  5. gpu_saturated: utilisation is at least 0.9 and latency moves with it
//     (correlation over the 1m ring at least 0.5), or utilisation was too
//     flat over the ring to correlate (pinned high: no headroom).
//  6. not_gpu: utilisation is under 0.5 and either flat or not moving with
//     latency: look at the network, pre-processing, CPU or the server's
//     queue.
//  7. unknown: anything else (a busy but not saturated GPU, say).
//
// The Correlator exports infergate_model_gpu_correlation,
// infergate_model_gpu_queue_correlation, infergate_model_latency_baseline_seconds
// and infergate_model_cause_hint (see Register), and serves the same state
// to readers such as the admin API's /api/v1/models through Models and
// Model.
package correlate
