package release

import (
	"math"
	"time"
)

// The power of the regression tests: how many candidate calls a step
// takes before the tests, had the candidate been worse by the smallest
// change that matters, would have rolled it back with probability
// Judgement.Power. A step that saw that many calls, and no sign of a
// regression, is promoted even while the confidence sequences are still
// too wide to clear the smallest change (which, for a heavy-tailed p99,
// takes tens of thousands of calls).
//
// A test's log statistic grows by a random amount at each call. Under
// an alternative its increments have a mean d > 0 and a spread s per
// candidate call, so after n calls the statistic is about n·d, give or
// take s·√n. It reaches the bar b by n with probability power when
// n·d − z·s·√n ≥ b, z the normal quantile of power. A mixture is at
// least its best component's statistic divided by the number of
// components, so b is the test's bar plus the log of that number, and
// the best component gives the fewest calls. The latency answer is then
// multiplied by latencyMargin: the bands' shares are estimated from the
// stable calls, the shares drift, and a rollback also needs the
// estimated change to be one that matters (in the simulations, a
// candidate exactly 1.10 times slower is rolled back within the
// margined number of calls in over 90% of runs, within the bare one in
// fewer). The error test's answer is not margined: it already asks for
// thousands of calls at a stable error rate of a few tenths of a
// percent, and it counts the calls of every step, since the test keeps
// its evidence across steps.

// latencyMargin multiplies the calls the normal approximation asks for
// the latency tests.
const latencyMargin = 1.5

// zOf is the standard normal quantile of p.
func zOf(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

// callsToCatch solves n·d − z·s·√n = b for n; +Inf when the increments
// do not grow (d ≤ 0).
func callsToCatch(d, s, b, z float64) float64 {
	if !(d > 0) {
		return math.Inf(1)
	}
	x := (z*s + math.Sqrt(z*z*s*s+4*d*b)) / (2 * d)
	return x * x
}

// shareCalls returns the candidate calls a share test with alternatives
// ratios needs to reach its bar b (log, the test's own components not
// yet counted) with the power of z, when a candidate call lands in bin
// k with probability cand[k], a stable one with probability stable[k]
// (calls in no bin count nothing), and a call is the candidate's with
// probability p.
func shareCalls(ratios [][]float64, cand, stable []float64, p, b, z float64) float64 {
	if !(p > 0.0005 && p < 0.9995) {
		return math.Inf(1)
	}
	b += math.Log(float64(len(ratios)))
	k := (1 - p) / p // stable calls per candidate call
	lp, l1p := math.Log(p), math.Log1p(-p)
	best := math.Inf(1)
	for _, r := range ratios {
		var mc, vc, ms, vs float64
		for i := range cand {
			q := p * r[i] / (p*r[i] + 1 - p)
			a, c := math.Log(q)-lp, math.Log1p(-q)-l1p
			mc += cand[i] * a
			vc += cand[i] * a * a
			ms += stable[i] * c
			vs += stable[i] * c * c
		}
		vc -= mc * mc
		vs -= ms * ms
		d := mc + k*ms
		s := math.Sqrt(max(vc+k*vs, 0))
		best = min(best, callsToCatch(d, s, b, z))
	}
	return best
}

// latencyPowerCalls returns the candidate calls of a size class the
// latency tests need to catch a candidate slower by the factor slower
// everywhere: the stable calls' histogram st gives each band's share of
// stable calls, and of the same calls made slower, the candidate's under
// that alternative. +Inf without bands yet.
func latencyPowerCalls(st *counts, e *edges, slower, tail, p, bar, z float64) float64 {
	if e == nil {
		return math.Inf(1)
	}
	var stable, cand [nBins]float64
	var n float64
	for i, c := range st {
		if c == 0 {
			continue
		}
		lo, next := bucketRange(i)
		mid := float64(lo+next) / 2
		stable[e.bin(i)] += float64(c)
		cand[e.bin(bucketOf(time.Duration(mid*slower)))] += float64(c)
		n += float64(c)
	}
	if n == 0 {
		return math.Inf(1)
	}
	for i := range stable {
		stable[i] /= n
		cand[i] /= n
	}
	body, top := latencyRatios(tail)
	// The latency evidence averages the body and the tail tests.
	b := bar + math.Log(2)
	return latencyMargin * min(shareCalls(body, cand[:], stable[:], p, b, z), shareCalls(top, cand[:], stable[:], p, b, z))
}

// errorPowerCalls returns the candidate calls the error test needs to
// catch a candidate failing rise more (a fraction) than the stable
// version's rate f.
func errorPowerCalls(f, rise, p, bar, z float64) float64 {
	f1 := min(f+rise, 1)
	return shareCalls(errorRatios(), []float64{f1}, []float64{f}, p, bar, z)
}

// agreementPowerCalls returns the compared answers the agreement test
// needs to catch a shadow disagreeing on twice the share f0 it is
// allowed (its null hypothesis is f0 itself, where no test has power).
func agreementPowerCalls(f0, bar, z float64) float64 {
	t := newPropTest(f0, false)
	f1 := min(2*f0, 0.999)
	best := math.Inf(1)
	for j := range shifts {
		d := f1*t.hit[j] + (1-f1)*t.miss[j]
		s := math.Sqrt(f1*(1-f1)) * math.Abs(t.hit[j]-t.miss[j])
		best = min(best, callsToCatch(d, s, bar+math.Log(float64(len(shifts))), z))
	}
	return best
}
