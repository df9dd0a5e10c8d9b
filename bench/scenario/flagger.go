package scenario

import (
	"fmt"
)

// Flagger's canary analysis, computed from the calls of a `bench release`
// run so that it and infergate judge the very same calls. Flagger checks
// its metrics once per interval (usually 1 minute) against fixed
// thresholds (request-success-rate ≥ min, request-duration p99 ≤ max) and
// rolls back after `threshold` failed checks (usually 5); checks that pass
// advance the canary's weight by stepWeight until maxWeight, then promote.
// Its documentation: flagger.app, "Canary analysis".

// ReleaseCall is one call of a release run.
type ReleaseCall struct {
	// At is the intended send time, seconds since the load started.
	At float64 `json:"t_s"`
	// Latency is measured from the intended send time (ms).
	Latency float64 `json:"latency_ms"`
	// OK says the call succeeded.
	OK bool `json:"ok"`
	// Candidate says the candidate answered it (the response's version).
	Candidate bool `json:"candidate"`
}

// FlaggerRule is Flagger's analysis as a user sets it.
type FlaggerRule struct {
	// Interval between checks, seconds (Flagger's `interval`, 60).
	Interval float64
	// Threshold is the number of failed checks that rolls back (5).
	Threshold int
	// MinSuccess is the lowest success rate a check passes, in percent
	// (request-success-rate thresholdRange.min, 99).
	MinSuccess float64
	// MaxP99 is the highest candidate p99 a check passes, ms
	// (request-duration thresholdRange.max).
	MaxP99 float64
	// Checks is the number of passing checks that promote the canary
	// (maxWeight / stepWeight); 0: never promoted in the run.
	Checks int
}

// FlaggerVerdict is what Flagger would have decided.
type FlaggerVerdict struct {
	// Decision: "rollback", "promote" or "none" (the run ended first).
	Decision string `json:"decision"`
	// At is when, seconds since the canary started; 0 for none.
	At float64 `json:"at_s"`
	// Failed is the number of failed checks when it decided or the run ended.
	Failed int `json:"failed_checks"`
}

// Flagger judges the candidate's calls from start (the canary's first
// second) on, as Flagger's controller would: a check at the end of each
// full interval looks at that interval's candidate calls only (a check
// with no candidate call fails: Flagger's "no values found" halts the
// canary and counts as failed).
func (r FlaggerRule) Flagger(calls []ReleaseCall, start, end float64) FlaggerVerdict {
	failed, passed := 0, 0
	for t := start + r.Interval; t <= end; t += r.Interval {
		ok := r.check(calls, t-r.Interval, t)
		if ok {
			passed++
			if r.Checks > 0 && passed >= r.Checks {
				return FlaggerVerdict{Decision: "promote", At: t - start, Failed: failed}
			}
			continue
		}
		failed++
		if failed >= r.Threshold {
			return FlaggerVerdict{Decision: "rollback", At: t - start, Failed: failed}
		}
	}
	return FlaggerVerdict{Decision: "none", Failed: failed}
}

// check is one of Flagger's checks over the candidate's calls in [from, to).
func (r FlaggerRule) check(calls []ReleaseCall, from, to float64) bool {
	var lat []float64
	n, okN := 0, 0
	for _, c := range calls {
		if !c.Candidate || c.At < from || c.At >= to {
			continue
		}
		n++
		if c.OK {
			okN++
			lat = append(lat, c.Latency)
		}
	}
	if n == 0 {
		return false
	}
	if 100*float64(okN)/float64(n) < r.MinSuccess {
		return false
	}
	return len(lat) == 0 || quantile(lat, 0.99) <= r.MaxP99
}

// FlaggerThresholds sets Flagger's thresholds the way a careful user
// would from the stable version's calls before the canary: the p99 bound
// margin above the stable p99 (1.2: 20% over it), and the success bound
// one point under the stable's success rate (at most 99%, Flagger's
// example).
func FlaggerThresholds(calls []ReleaseCall, before float64, margin float64) (maxP99, minSuccess float64, err error) {
	var lat []float64
	n, okN := 0, 0
	for _, c := range calls {
		if c.Candidate || c.At >= before {
			continue
		}
		n++
		if c.OK {
			okN++
			lat = append(lat, c.Latency)
		}
	}
	if len(lat) < 100 {
		return 0, 0, fmt.Errorf("flagger thresholds: %d stable calls before the canary, want 100 or more", len(lat))
	}
	return margin * quantile(lat, 0.99), min(99, 100*float64(okN)/float64(n)-1), nil
}
