// Package anomaly finds the seconds in which a model behaves unlike its
// own recent normal seconds, and says which of its features made them
// unusual, in words. It imports nothing of infergate: the alert engine
// feeds it, once a second per model, the model's features already
// expressed as deviations from the model's baseline for that hour of the
// week, and turns its scores into the `kind: anomaly` rule (issue 47).
//
// # What it is fed
//
// One vector per model and second (Detector.Observe), in the order of the
// features given to New. DefaultFeatures lists the nine of issue 47: p50,
// p99, error ratio, calls/s, queue p99, batch size, median input size,
// proxy overhead and GPU utilisation. Each value is a deviation, 0 at the
// baseline: ln(value/baseline) for the LogRatio ones (latencies, calls,
// queue, batch, inputs, overhead), value − baseline for the Points ones
// (error ratio, GPU utilisation, as fractions), or a robust z-score for a
// Sigma one. NaN means "no value this second" (no GPU source): the
// feature counts as at its baseline and is never named. The detector
// standardises every feature by the median and spread (1.4826 × MAD,
// floored by Feature.MinScale) of its own learnt seconds, so the caller's
// units do not change the score. A per-second error ratio of a model
// with few calls is noisy: feed a smoothed ratio or a z-score.
//
// Each feature has a Side. Latency, errors, queue, input size, overhead
// and GPU utilisation are Up (a fall reads as the baseline: getting
// better or lighter is never an incident); calls/s is Down. So load
// doubling, calls/s +100% at flat latency, scores like a usual second:
// more calls answered at the same latency is load, and if the load hurts,
// the latency, queue and error features say so and score.
//
// # What it learns
//
// The last 256 learnt seconds (WithWindow). A second is learnt when the
// caller allows it (learn = true: not inside an incident, a deploy, a
// drain) and its score is below 0.8 (WithLearnBelow), so the first
// seconds of an incident nobody has marked yet are not learnt either.
// Level changes that last are for the baselines to accept (monitor/
// baseline's AcceptAfter): once the deviations return to 0, the detector
// learns again. Until it has learnt 192 seconds (3/4 of a window: half to
// count, a quarter to calibrate) it is Learning: its score is 0, it
// explains nothing, and the alert engine shows "learning" and never
// pages.
//
// # How it scores: Half-Space Trees
//
// A forest of 32 trees (WithTrees) of 7 splits from root to leaf
// (WithDepth), after Tan, Ting and Liu (2011), "Fast anomaly detection
// for streaming data". Every feature's standardised deviation on its
// anomalous side(s) is log-compressed, u = log2(1 + |z|) up to 15σ, so
// that a path's few splits on a feature fall near 2σ and 4σ where usual
// and unusual seconds part. A tree splits three features (each in about
// a third of the trees), each two or three times along a path, always
// at the middle of the node's range; the structure is drawn once from the
// seed, before any data. The learnt seconds are counted into the nodes
// (a mass per node), afresh every 64 learnt seconds. A second is scored by
// walking it down every tree until it enters a node with no learnt second
// (or reaches a leaf): each split on the way adds −log2(share of the
// parent's mass on the second's side) − 1 bits to the split's feature.
// The sum over a path is minus the log of the Half-Space Trees score
// (mass × 2^depth, a density): a second that leaves the learnt seconds
// behind early is surprising.
//
// The score is the mean surprise over the trees, smoothed over seconds
// (weight 0.4 for the latest: a shift that lasts builds up within 2-3 s,
// a one-second burst of noise counts for less), and calibrated by the
// detector's own scores of learnt seconds: z = (surprise − their median)
// / (1.4826 × their MAD), score = 1 / (1 + e^(−z/2.5)). A usual second
// scores about 0.5; Threshold (0.9) is z ≈ 5.5 for every model alike.
//
// # The features that made a score
//
// Each feature's contribution is the surprise of the splits on it, above
// its usual share among learnt seconds (mean plus mean absolute
// deviation). The contributions add up to the score's surprise, so they
// are exact, not a post-hoc guess. Result.Top names the features that
// carry more than 15% of it, largest first; Explain says it in words,
// through a small table of named patterns that read the first feature and
// the direction of the others: throughput collapse with flat latency
// ("calls/s −48% with p99 flat and queue ×3: fewer calls answered, not
// slower ones"), queue growth with flat p99, errors with p50 up (the mild
// compound), inputs grew, GPU saturation, latency rise, errors; else the
// top features with their changes.
//
// # Why Half-Space Trees
//
// Half-Space Trees, Robust Random Cut Forest (Guha et al. 2016) and an
// isolation forest over a sliding window (Liu, Ting and Zhou 2008) were
// weighed:
//
//   - Cost per update: HS-Trees walk one path per tree (32 × 7 steps)
//     and recount a fixed array; RRCF inserts and deletes a point per
//     tree (tree surgery, pointer nodes, bounding boxes per node); a
//     windowed isolation forest rebuilds its trees from the window.
//   - Memory: HS-Trees are arrays fixed at New: 2 bytes of mass per node
//     (32 × 255 nodes, 16 KiB) and the window's seconds (9 KiB); about
//     35 KiB per model in all, measured. RRCF keeps every windowed point
//     in every tree with its boxes: with 9 features a 256-point forest of
//     32 trees is hundreds of KiB.
//   - Drift: the counts are of the last window of learnt seconds only,
//     and leaving out an incident is simply not learning its seconds; a
//     forest that forgets by deleting points needs the same bookkeeping.
//   - Attribution: the split features on a path, weighted by the mass
//     they cut away, add up exactly to the score; RRCF's codisplacement
//     by dimension needs a second walk per tree.
//
// Go implementations checked: github.com/andysgithub/go-rrcf (a port of
// the Python rrcf: pointer trees, maps of leaves, allocations per insert,
// no attribution, unmaintained), github.com/narumiruna/go-iforest (an
// isolation forest with a bare README, fitted on a batch), and
// e-XpertSolutions/go-iforest as remembered (a batch isolation forest).
// None has Half-Space Trees; none fits the 20 µs, 64 KiB and allocation-free
// bounds, so this one is written here, on the standard library.
//
// # Cost
//
// Per model and second about 10 µs on a loaded 2-core machine, recounts
// included, no allocation except the words of a second scored at or
// above 0.75 (WithExplainAbove); about 35 KiB per model; 1,000 models
// cost about 12 ms of CPU per second, 1.2% of a core
// (BenchmarkThousandModelsSecond, TestMemoryPerModel).
//
// # Concurrency
//
// A Detector serves one goroutine. A Registry keeps one per model,
// bounded (ErrFull past its size), safe for concurrent use; the caller
// forgets models gone quiet (ForgetQuiet).
package anomaly
