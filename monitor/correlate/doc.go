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
// A model's latency is up when its recent calls are, with confidence,
// above its baseline (baseline.Up: a p50, p90 or p99 whose lower
// confidence bound exceeds the level by baseline.DefaultRise), or over
// the model's SLO when one is set (Options.SLO), an absolute anchor that
// holds before any baseline exists and after a saturation has lasted
// long enough to be learned. Too few calls decide nothing: a p99 over a
// hundred calls is their slowest one, and one slow call is not a rise.
// The baseline is the shared seasonal store of package baseline; the
// correlator feeds it one sample per model and step, and samples taken
// while up are not learned.
//
// # Cause hints
//
// Hint maps a Signal to one of the Hint* names, first match wins:
//
//  1. none: latency is not up.
//  2. one_endpoint_slow: the model's upstream is a pool of replicas and
//     one of them answers it much slower than the others (its p99 at
//     least twice theirs, and its median above their p90: not one slow
//     call). The rest of the pool answers in time, so the cause is that
//     machine, whatever a GPU reads.
//  3. gpu_throttled: a thermal, power or hardware slowdown reason is
//     active and the SM clock is below its maximum (no input explains a
//     slower chip).
//  4. inputs_grew: the recent calls' request bytes or rows are, with
//     confidence, at least twice the model's usual (see Inputs below).
//     It wins over the GPU hints: bigger inputs explain a busy GPU.
//  5. input_shape_changed: the usual bytes, in half the rows or fewer
//     (bigger rows: longer sequences, larger images).
//  6. unknown: no GPU data for the model (no source, source down, model
//     not mapped to a GPU the sources read).
//  7. gpu_memory_pressure: used/total GPU memory is at least 0.95.
//  8. gpu_saturated: utilisation is at least 0.9 and latency moves with it
//     (correlation over the 1m ring at least 0.5), or utilisation was too
//     flat over the ring to correlate (pinned high: no headroom).
//  9. not_gpu: utilisation is under 0.5 and either flat or not moving with
//     latency: look at the network, pre-processing, CPU or the server's
//     queue.
//  10. unknown: anything else (a busy but not saturated GPU, say).
//
// # Inputs
//
// The registry counts each series' calls by request bytes and by rows
// (the batch dimension) in powers of two (monitor.InputCounts); every
// step the correlator takes the difference per model. The last
// RecentSlices steps are the recent window, as for latency; every calm
// step (latency not up) is learned into a baseline that halves its
// weight every InputHalfLife steps (30 minutes), so an incident's inputs
// are not learned and a lasting change that does not hurt latency
// becomes the normal within the hour. The baseline is known after
// MinInputSteps calm steps.
//
// "The p90 grew" is a binomial test like the latency quantiles' (monitor.
// LowerBoundRank): the baseline's p90 lies in a bucket, below 2^b; the
// recent p90 is at least twice it when enough recent calls lie at or
// above 2^(b+1) that the p90's lower confidence bound is among them. A
// ×4 growth always passes with MinInputCalls calls or more, one big call
// in ten never does, and a steady mix of sizes does not (its p90 is the
// baseline's). Rows shrinking is the mirror test on the p90's upper
// bound. ModelState.Inputs holds both p90s (tops of their buckets) and
// InputDist.Above answers for other factors (the alert condition
// input_size_above_baseline).
//
// # Cost
//
// An Attributor (cost.go) splits each GPU's busy time (utilisation ×
// time) and energy (the energy counter's difference, or power × time)
// among the models on it by their share of its busy time: the server's
// per-model compute time where it exports one, else the upstream time of
// the proxy's calls (from the registry's slice sums, never from a call).
// It serves /api/v1/cost and infergate_model_gpu_seconds_total and
// infergate_model_energy_joules_total; docs/cost.md says where it can be
// wrong.
//
// The Correlator exports infergate_model_gpu_correlation,
// infergate_model_gpu_queue_correlation, infergate_model_latency_baseline_seconds
// and infergate_model_cause_hint (see Register), and serves the same state
// to readers such as the admin API's /api/v1/models through Models and
// Model.
package correlate
