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
// the same kind of bounds as proportions.
//
// Promotion. A step is promoted when it has its minimum calls, no
// rollback test is above its bar, every estimate is on the right side of
// the smallest change that matters (p50 and tail ratio below 1.10, error
// difference below +0.5 points, agreement above 99%, by default), and
// either every bound is on that side too, or the step has seen enough
// candidate calls that the rollback tests would have caught a candidate
// worse by the smallest change that matters with probability
// Judgement.Power (90% by default). The bounds alone take tens of
// thousands of calls for a heavy-tailed p99; the power rule takes a few
// thousand. The calls needed come from the stable version's own calls: a
// candidate 10% slower everywhere would put its calls in the stable
// bands with the shares of the stable histogram with every latency made
// 10% longer; each alternative of the latency test then gains on average
// d per candidate call (its expected log likelihood ratio) with a spread
// s, so it reaches its bar b (the rollback bar plus the log of the number
// of alternatives it is averaged with) by n calls with probability Power
// when n·d − z·s·√n ≥ b, z the normal quantile of Power. The best
// alternative's n, times a margin of 1.5, is the calls needed per size
// class. For errors, the same with a failure rate of the stable rate
// plus min_change.errors against the stable rate, counting the calls of
// earlier steps (the error test keeps its evidence); for a shadow, the
// pairs that catch a disagreement twice the share allowed. This is an
// approximation (the normal one, with shares estimated from the calls),
// and a rollback also needs the estimated change to matter; in the
// simulations a candidate exactly at the smallest change that matters
// (1.10x) is rolled back or held, and none of 100 runs is promoted. A
// step still short of evidence at its time limit is held for an
// operator, not promoted.
//
// The price of being valid at every moment is evidence: a candidate 1.3
// times slower is caught in about a hundred calls, while a candidate no
// worse is promoted after about 1,200 candidate calls per step on
// latency, and, at a stable error rate of 0.3%, about 5,600 calls for
// the error test (at 100 calls/s through 10%, 25% and 50%, about 11
// minutes in all). Decisions carry their evidence in words, for example:
// "promoted from 10% to 25%: 5,600 candidate calls, enough to have
// caught latencies 10% slower or errors +0.5 points with 90% power, and
// none seen (p50 0.80x, p99 0.79x version 1's, errors -0.13 points)", or
// "version 2's p50 is 1.30x version 1's
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
