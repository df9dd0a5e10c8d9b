package release

import "math"

// The statistics of the judgement: likelihood-ratio martingales mixed
// over a few alternatives. Each is a product of factors whose expectation
// is at most 1 under the null hypothesis, so by Ville's inequality it
// ever reaches 1/alpha with probability at most alpha, however often it
// is read. Averaging martingales with fixed weights keeps that property,
// which is what "mixture" means here.

// shifts are the log-odds distances of the alternatives the proportion
// bounds mix: from 10% off to 25 times (3.2) in odds.
var shifts = [...]float64{0.1, 0.2, 0.4, 0.8, 1.6, 3.2}

func logit(p float64) float64   { return math.Log(p) - math.Log1p(-p) }
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// logMeanExp returns log(mean(exp(xs))) without overflow.
func logMeanExp(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	if math.IsInf(m, 0) {
		return m
	}
	var s float64
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	return m + math.Log(s/float64(len(xs)))
}

// propTest is a mixture likelihood ratio of s successes in n trials:
// alternatives a shift below the rate f in log-odds (down) or above (up)
// against f. For down it is a supermartingale under any rate at least f,
// for up under any rate at most f.
type propTest struct {
	hit, miss [len(shifts)]float64 // log g/f and log (1-g)/(1-f)
}

func newPropTest(f float64, down bool) propTest {
	var t propTest
	lf, l1f, lo := math.Log(f), math.Log1p(-f), logit(f)
	for j, d := range shifts {
		if down {
			d = -d
		}
		g := sigmoid(lo + d)
		t.hit[j], t.miss[j] = math.Log(g)-lf, math.Log1p(-g)-l1f
	}
	return t
}

func (t *propTest) logLR(s, n float64) float64 {
	var xs [len(shifts)]float64
	for j := range shifts {
		xs[j] = s*t.hit[j] + (n-s)*t.miss[j]
	}
	return logMeanExp(xs[:])
}

// propLogLR is newPropTest(f, down).logLR(s, n).
func propLogLR(s, n, f float64, down bool) float64 {
	t := newPropTest(f, down)
	return t.logLR(s, n)
}

// propBounds returns a confidence sequence for a rate after s successes
// in n trials: with probability at least 1-alpha the rate stays inside
// [lo, hi] at every n, alpha/2 on each side.
func propBounds(s, n uint64, alpha float64) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	bar := math.Log(2 / alpha)
	fs, fn := float64(s), float64(n)
	mle := fs / fn
	lo, hi = 0, 1
	if s > 0 {
		// lo: the smallest f the "up" test does not reject.
		a, b := -40.0, logit(min(mle, 1-1e-12))
		for range 36 {
			m := (a + b) / 2
			if propLogLR(fs, fn, sigmoid(m), false) >= bar {
				a = m
			} else {
				b = m
			}
		}
		lo = sigmoid(b)
	}
	if s < n {
		a, b := logit(max(mle, 1e-12)), 40.0
		for range 36 {
			m := (a + b) / 2
			if propLogLR(fs, fn, sigmoid(m), true) >= bar {
				b = m
			} else {
				a = m
			}
		}
		hi = sigmoid(a)
	}
	return lo, hi
}

// rankBounds returns the ranks between which the p-quantile of n
// latencies lies: the number of latencies at or below the true quantile
// is a Binomial(n, p) count, and the two mixture tests of propLogLR keep
// it within [kmin, kmax] at every n with probability 1-alpha. So the
// quantile is at least the kmin-th smallest latency and below the
// (kmax+1)-th; kmin < 1 means no lower bound, kmax >= n no upper bound.
// This is the confidence sequence for a fixed quantile of Howard and
// Ramdas ("Sequential estimation of quantiles with applications to A/B
// testing and best-arm identification", Bernoulli 2022, theorem 1), with
// a discrete mixture in place of their beta one.
func rankBounds(n uint64, p, alpha float64) (kmin, kmax int64) {
	bar := math.Log(2 / alpha)
	fn := float64(n)
	down, up := newPropTest(p, true), newPropTest(p, false)
	// The "down" test rejects small counts; its statistic falls as k grows.
	a, b := int64(-1), int64(n) // reject(a), !reject(b)
	if down.logLR(float64(b), fn) >= bar {
		return int64(n) + 1, int64(n)
	}
	for b-a > 1 {
		m := (a + b) / 2
		if m >= 0 && down.logLR(float64(m), fn) < bar {
			b = m
		} else {
			a = m
		}
	}
	kmin = b
	// The "up" test rejects large counts.
	a, b = int64(n)+1, kmin // reject(a), !reject(b)
	for a-b > 1 {
		m := (a + b) / 2
		if m <= int64(n) && up.logLR(float64(m), fn) < bar {
			b = m
		} else {
			a = m
		}
	}
	return kmin, b
}

// shareTest is the conditional-share test: among the calls that fell in
// a bin (a band of the stable version's latencies, or "failed"), a
// candidate call has probability p, the candidate's share of all calls,
// when the candidate is no different. Each component j is the
// likelihood ratio of an alternative in which a candidate call lands in
// bin b ratio[j][b] times as often as a stable one.
type shareTest struct {
	ratio [][]float64
	logM  []float64
}

func newShareTest(ratio [][]float64) shareTest {
	return shareTest{ratio: ratio, logM: make([]float64, len(ratio))}
}

// add multiplies in a tick's calls: cand[b] and stable[b] calls of bin b,
// with p the candidate's share fixed before the tick.
func (t *shareTest) add(p float64, cand, stable []uint64) {
	if !(p > 0.0005 && p < 0.9995) {
		return // nothing to compare against
	}
	lp, l1p := math.Log(p), math.Log1p(-p)
	for j, r := range t.ratio {
		var x float64
		for b := range cand {
			if cand[b] == 0 && stable[b] == 0 {
				continue
			}
			q := p * r[b] / (p*r[b] + 1 - p)
			x += float64(cand[b])*(math.Log(q)-lp) + float64(stable[b])*(math.Log1p(-q)-l1p)
		}
		t.logM[j] += x
	}
}

// logValue is the log of the mixture: the evidence against "no
// difference" as a likelihood ratio.
func (t *shareTest) logValue() float64 { return logMeanExp(t.logM) }

// binLevels returns the stable quantiles that cut latencies into bins:
// the body's deciles and quartiles, then the tail quantile.
func binLevels(tail float64) []float64 { return []float64{0.1, 0.25, 0.5, 0.75, 0.9, tail} }

const nBins = 7

// latencyRatios returns the alternatives of the body test (a
// candidate slower everywhere: a bin's ratio grows with the normal score
// of its middle, exp(beta·score), as a shift of a normal distribution
// would make it) and of the tail test (only calls above the tail
// quantile, odds up to 20 times).
func latencyRatios(tail float64) (body, top [][]float64) {
	levels := binLevels(tail)
	var p0, score [nBins]float64
	prev := 0.0
	for b := range nBins {
		next := 1.0
		if b < len(levels) {
			next = levels[b]
		}
		p0[b] = next - prev
		score[b] = math.Sqrt2 * math.Erfinv(2*(prev+next)/2-1)
		prev = next
	}
	tilt := func(beta float64, s []float64) []float64 {
		var z float64
		for b := range nBins {
			z += p0[b] * math.Exp(beta*s[b])
		}
		r := make([]float64, nBins)
		for b := range nBins {
			r[b] = math.Exp(beta*s[b]) / z
		}
		return r
	}
	for _, beta := range []float64{0.1, 0.2, 0.35, 0.5, 0.75, 1} {
		body = append(body, tilt(beta, score[:]))
	}
	var topScore [nBins]float64
	topScore[nBins-1] = 1
	for _, beta := range []float64{0.7, 1.1, 1.6, 2.3, 3} {
		top = append(top, tilt(beta, topScore[:]))
	}
	return body, top
}

// errorRatios are the alternatives of the error test: a candidate call
// fails 2 to 21 times as often, in odds.
func errorRatios() [][]float64 {
	var r [][]float64
	for _, theta := range []float64{2, 3, 5, 8, 13, 21} {
		r = append(r, []float64{theta})
	}
	return r
}
