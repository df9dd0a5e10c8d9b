// Package release splits a model's calls between a stable target and a
// candidate, judges the candidate on every call, and decides: promote
// (the next step), hold (with the calls it still needs) or roll back
// (the candidate's weight to 0 at once). It imports nothing of
// infergate: the proxy asks it at the pick and feeds it numbers.
//
// # Use from the proxy
//
//	set, err := release.New(specs, release.WithRollback(raiseAlert))
//	// per call, lock-free, no allocation:
//	rt := set.Route(model)               // nil: no release
//	c := rt.Choose(stickyValue, clientNamedVersion)
//	// send to c.Target (nil: unchanged); maybe a copy to c.Shadow
//	c.Release.Observe(c.Version, sizeClass, latency, ok)
//	c.Release.ObserveShadow(agree)       // after comparing the answers
//	// about once a second, off the call path:
//	decisions := set.Judge(now)
//	// admin API: Pause, Resume, Promote, Rollback, Status; state file:
//	// Snapshot, Restore; reload: Apply.
//
// A client that names a version itself keeps it (Choice.AsAsked) and its
// call is not judged: who pins a version is not a random share of the
// traffic. A sticky key (a header's value, or the Triton sequence_id)
// hashes to a fixed place in [0, 1); the caller is on the candidate iff
// that place is below the weight, so raising the weight moves only
// stable callers to the candidate. Calls without a key are spread by the
// golden-ratio sequence, not coin flips, so a 1% weight is 1% of any few
// hundred calls.
//
// # The judgement in plain words
//
// Regression tests (roll back). Within one input-size class, the calls
// of both versions are sorted into bands by the stable version's own
// latency quantiles (10%, 25%, 50%, 75%, 90% and the tail quantile), cut
// from past stable calls only. If the candidate is no different, a call
// in any band, or a failed call, is a candidate call with the same
// probability as any call: the candidate's share of the calls. That holds
// second by second whatever the load does, because a load swing slows
// both versions alike. So the test counts, per band, how many calls were
// the candidate's, against that known share. Its statistic is a
// likelihood ratio averaged over a few alternatives ("the candidate lands
// in slow bands more often", "above the tail more often", "fails 2 to 21
// times as often"): a mixture sequential probability ratio test. Under
// "no difference" it is a martingale, so by Ville's inequality it ever
// exceeds 1/alpha with probability at most alpha, however often it is
// read: no fixed sample, no peeking penalty. The latency and error tests
// (and the shadow's agreement test) share alpha, and the tests keep
// their evidence across steps, so alpha bounds the false-rollback rate of
// the whole release. A rollback also needs the estimated change to be
// one that matters (a p50 or tail ratio above 1 + min_change.tail, an
// error rate higher by min_change.errors points).
//
// Bounds (promote and report). Each version's latency quantiles get a
// confidence sequence: the number of calls at or below the true quantile
// is a binomial count, and the same kind of mixture test on it gives
// ranks between which the quantile lies at every moment at once (Howard
// and Ramdas 2022, "Sequential estimation of quantiles"). The ratio of
// the candidate's p50 and tail to the stable ones' is bounded by the
// quotient of those bounds; error rates and the shadow's agreement get
// the same kind of bounds as proportions. A step is promoted when it has
// its minimum calls and every bound is on the right side of the smallest
// change that matters (p50 and tail ratio below 1.10, error difference
// below +0.5 points, agreement above 99%, by default). A step still short
// of that at its time limit is held for an operator, not promoted.
//
// The price of being valid at every moment is evidence: showing that a
// candidate's p99 is not 10% worse takes a few thousand candidate calls
// per step (at 1% of 100 calls/s, over an hour), while a candidate 1.3
// times slower is caught in about a hundred calls. Decisions carry their
// evidence in words, for example: "version 2's p50 is 1.30x version 1's
// for inputs of size class 0 (99% confidence sequence 0.92-1.80, 70
// candidate and 626 stable calls; evidence 526:1 against no slowdown);
// rolled back at 10%".
//
// # Cost
//
// Choose and Observe take no lock and allocate nothing (benchmarks in
// bench_test.go). Latencies are counted in log-linear buckets (1.6% wide,
// atomic counters): 13 KiB per version and size class, made at a class's
// first call, so 27 KiB per class and at most 213 KiB per release
// (MaxClasses 8); a release with one busy class holds about 30 KiB. The
// judgement costs about 0.2 ms per release when it recomputes its bounds
// (at most every 5 s, or when a test crosses its bar).
package release
