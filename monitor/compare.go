package monitor

import (
	"math"
	"time"
)

// CompareLevel is the confidence level of the comparisons the proxy
// reports (the version comparison of /api/v1/models): the true ratio lies
// in the interval with at least this probability.
const CompareLevel = 0.95

// Distribution is one group's merged values of one component over one
// window, for statistics the fixed quantiles of Stats do not answer (an
// interval around a quantile, a comparison of two groups). It is a copy:
// reading it takes no registry lock.
type Distribution struct {
	m *merger
}

// Distributions merges, per group, window w of component c of every series
// whose group(key) is not "" (the overflow series is left out). Groups
// without calls in the window are absent. It reads like Snapshot and
// changes nothing.
func (r *Registry) Distributions(w Window, c Component, group func(SeriesKey) string) map[string]*Distribution {
	byGroup := map[string][]*Series{}
	for _, s := range r.state.Load().list {
		if g := group(s.key); g != "" {
			byGroup[g] = append(byGroup[g], s)
		}
	}
	out := map[string]*Distribution{}
	r.winMu.RLock()
	defer r.winMu.RUnlock()
	for g, list := range byGroup {
		var calls int64
		for _, s := range list {
			calls += s.win.windowCalls(w)
		}
		if calls == 0 {
			continue
		}
		m := newMerger()
		// As in snapshot: dense for a busy minute of fine slices, packed
		// for the one-minute buckets.
		m.reset(w == Window1m && calls >= denseMinCalls)
		for _, s := range list {
			s.win.addTo(m, w, c)
		}
		if m.count > 0 {
			out[g] = &Distribution{m: m}
		}
	}
	return out
}

// windowCalls counts the calls of window w (called with Registry.winMu
// held).
func (win *window) windowCalls(w Window) int64 {
	var n int64
	if w == Window1m {
		for _, sl := range win.fine {
			if sl != nil {
				n += int64(sl.count)
			}
		}
		return n
	}
	k := len(win.coarse)
	for i := range windowMinutes[w] {
		if sl := win.coarse[(win.coarsePos-i+k)%k]; sl != nil {
			n += int64(sl.count)
		}
	}
	return n
}

// addTo merges window w of component c into m, the slices snapshot reads
// for that window (called with Registry.winMu held).
func (win *window) addTo(m *merger, w Window, c Component) {
	if w == Window1m {
		for _, sl := range win.fine {
			m.add(sl, c)
		}
		return
	}
	if d := win.done[w]; d != nil {
		m.add(d, c)
	} else {
		k := len(win.coarse)
		for i := 1; i < windowMinutes[w]; i++ {
			m.add(win.coarse[(win.coarsePos-i+k)%k], c)
		}
	}
	m.add(win.coarse[win.coarsePos], c)
}

// Count returns the number of values.
func (d *Distribution) Count() uint64 { return uint64(d.m.count) }

// Stats returns the quantiles, count, sum and maximum, as a snapshot
// reports them.
func (d *Distribution) Stats() Stats { return d.m.stats() }

// atRanks returns the values at ranks (1-based, ascending), each capped at
// the exact maximum.
func (d *Distribution) atRanks(ranks []int64) []time.Duration {
	m := d.m
	var vs []int64
	switch {
	case !m.hist:
		vs = rawAtRanks(m.raw, m.zeros, ranks)
	default:
		pcts := make([]float64, len(ranks))
		for i, r := range ranks {
			pcts[i] = 100 * float64(r) / float64(m.count)
		}
		if m.dense {
			vs = m.d.ValueAtPercentilesSlice(pcts)
		} else {
			vs = m.p.ValueAtPercentilesSlice(pcts)
		}
	}
	out := make([]time.Duration, len(vs))
	for i, v := range vs {
		out[i] = min(fromMicros(v), time.Duration(m.max))
	}
	return out
}

// QuantileInterval returns a two-sided confidence interval on quantile q:
// with probability at least level the true quantile lies in [lo, hi]. It
// is distribution-free (two order statistics, chosen by the binomial law
// of how many calls fall below the quantile), so it holds for any latency
// shape. ok is false when the values are too few for such an interval (a
// p99 at 97.5% needs about 440).
func (d *Distribution) QuantileInterval(q, level float64) (lo, hi time.Duration, ok bool) {
	l, h, ok := QuantileRanks(d.Count(), q, level)
	if !ok {
		return 0, 0, false
	}
	vs := d.atRanks([]int64{int64(l), int64(h)})
	return vs[0], vs[1], true
}

// QuantileRanks returns the ranks (1-based, ascending) of the order
// statistics of n values that bracket quantile q with probability at
// least level, each side failing with at most (1-level)/2. ok is false
// when n is too small for either side.
func QuantileRanks(n uint64, q, level float64) (lo, hi uint64, ok bool) {
	if n == 0 || q <= 0 || q >= 1 || level <= 0 || level >= 1 {
		return 0, 0, false
	}
	tail := (1 - level) / 2
	// The values above the true quantile are Binomial(n, 1-q). The k-th
	// largest value is below the quantile only when fewer than k values
	// are above it; the (j+1)-th largest is above the quantile only when
	// at most j values are.
	p := 1 - q
	k := upperTail(n, p, tail)
	j, jok := lowerTail(n, p, tail)
	if k > n || !jok {
		return 0, 0, false
	}
	return n - k + 1, n - j, true
}

// MinCalls returns the least number of values for which QuantileRanks has
// an interval on quantile q at level (0 when none up to a billion does).
func MinCalls(q, level float64) uint64 {
	ok := func(n uint64) bool { _, _, ok := QuantileRanks(n, q, level); return ok }
	hi := uint64(1)
	for !ok(hi) {
		if hi > 1<<30 {
			return 0
		}
		hi *= 2
	}
	lo := hi / 2 // !ok(lo), or lo == 0
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// zOf returns the standard normal quantile with upper tail a.
func zOf(a float64) float64 { return math.Sqrt2 * math.Erfinv(1-2*a) }

// upperTail returns the least k with P(Binomial(n, p) >= k) <= a (n+1
// when even k = n is too likely).
func upperTail(n uint64, p, a float64) uint64 {
	nf := float64(n)
	lambda := nf * p
	pmf := math.Exp(nf * math.Log1p(-p)) // P(X = 0)
	if lambda > 100 || pmf == 0 {
		// Normal approximation with continuity correction, as
		// tailCalls: exact sums underflow at this size.
		k := math.Ceil(lambda + zOf(a)*math.Sqrt(lambda*(1-p)) + 0.5)
		return uint64(min(max(k, 0), nf+1))
	}
	cdf := 0.0 // P(X <= k-1)
	for k := uint64(0); k <= n; k++ {
		if 1-cdf <= a {
			return k
		}
		cdf += pmf
		pmf *= (nf - float64(k)) / float64(k+1) * p / (1 - p)
	}
	return n + 1
}

// lowerTail returns the greatest j with P(Binomial(n, p) <= j) <= a; ok
// is false when even j = 0 is too likely.
func lowerTail(n uint64, p, a float64) (j uint64, ok bool) {
	nf := float64(n)
	lambda := nf * p
	pmf := math.Exp(nf * math.Log1p(-p))
	if lambda > 100 || pmf == 0 {
		v := math.Floor(lambda - zOf(a)*math.Sqrt(lambda*(1-p)) - 0.5)
		if v < 0 {
			return 0, false
		}
		return uint64(min(v, nf)), true
	}
	cdf := 0.0
	for j := uint64(0); j <= n; j++ {
		cdf += pmf
		if cdf > a {
			if j == 0 {
				return 0, false
			}
			return j - 1, true
		}
		pmf *= (nf - float64(j)) / float64(j+1) * p / (1 - p)
	}
	return n, true
}

// QuantileRatio compares quantile Quantile of two distributions, a over b
// (a canary over its baseline, say).
type QuantileRatio struct {
	Quantile float64
	// Level is the confidence of [Lower, Upper]: the true ratio lies in it
	// with at least this probability.
	Level float64
	// A and B are the two quantiles as Stats reports them, Ratio is A/B.
	A, B  time.Duration
	Ratio float64
	// Lower and Upper bound the true ratio; zero when !OK.
	Lower, Upper float64
	// OK is false when a or b has too few values to bound its quantile
	// (see MinCalls); the ratio then supports no claim.
	OK bool
}

// CompareQuantile compares quantile q of a and b at confidence level. Each
// side's quantile gets an interval at 1-(1-level)/2, so both hold at once
// with probability at least level (Bonferroni), and the ratio's interval is
// a's low end over b's high end to a's high end over b's low end. It needs
// no assumption on the latency distributions; the price is a wider
// interval than a bootstrap would give, and a verdict that never changes
// between two reads of the same calls.
func CompareQuantile(a, b *Distribution, q, level float64) QuantileRatio {
	r := QuantileRatio{Quantile: q, Level: level}
	r.A, r.B = a.Stats().Quantile(q), b.Stats().Quantile(q)
	if r.B > 0 {
		r.Ratio = float64(r.A) / float64(r.B)
	}
	each := 1 - (1-level)/2
	alo, ahi, aok := a.QuantileInterval(q, each)
	blo, bhi, bok := b.QuantileInterval(q, each)
	if !aok || !bok || blo <= 0 || bhi <= 0 {
		return r
	}
	r.Lower, r.Upper, r.OK = float64(alo)/float64(bhi), float64(ahi)/float64(blo), true
	return r
}

// Slower reports whether a's quantile is, with confidence, above b's.
func (r QuantileRatio) Slower() bool { return r.OK && r.Lower > 1 }

// Faster reports whether a's quantile is, with confidence, below b's.
func (r QuantileRatio) Faster() bool { return r.OK && r.Upper < 1 }
