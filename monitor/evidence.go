package monitor

import (
	"math"
	"time"
)

// Confidence is how sure a lower bound on a quantile is: the true
// quantile lies at or above the bound with at least this probability
// (three standard deviations, one-sided). Rules and the GPU correlation
// read a quantile as "above T" only when its lower bound is above T, so
// that one slow call among a hundred is never taken for a slow p99.
const Confidence = 0.99865

// alpha is the chance that a bound lies above the true quantile.
const alpha = 1 - Confidence

// Bounds are lower confidence bounds on the quantiles of one Stats, in
// the order of Quantiles: with probability at least Confidence the true
// quantile is at least Lower[i]. OK[i] is false when the calls are too few
// to bound that quantile at all (a p99 needs a few hundred calls, a p50
// a dozen).
type Bounds struct {
	Lower [len(Quantiles)]time.Duration
	OK    [len(Quantiles)]bool
}

// LowerBoundRank returns the rank (1-based, in ascending order) of the
// order statistic that is a lower confidence bound on quantile q of n
// calls: the k-th largest call, where k is the least number of calls
// above the true quantile that chance alone gives with probability at
// most 1 - Confidence. ok is false when n is too small for any bound.
//
// It is the binomial test a quantile condition needs: "p99 > T" holds
// when at least k of n calls took longer than T, not when the slowest one
// did.
func LowerBoundRank(n uint64, q float64) (rank uint64, ok bool) {
	if n == 0 || q <= 0 || q >= 1 || float64(n)*(1-q) < 1-1e-9 {
		return 0, false
	}
	k := tailCalls(n, 1-q)
	if k > n {
		return 0, false
	}
	return n - k + 1, true
}

// tailCalls returns the least k with P(Binomial(n, p) >= k) <= alpha.
func tailCalls(n uint64, p float64) uint64 {
	nf := float64(n)
	lambda := nf * p
	if lambda > 100 {
		// Normal approximation with continuity correction; exact sums
		// would underflow and are not needed at this size.
		z := 3.0
		return uint64(math.Ceil(lambda + z*math.Sqrt(lambda*(1-p)) + 0.5))
	}
	// Exact: accumulate P(X <= k-1) until the rest is at most alpha.
	pmf := math.Exp(nf * math.Log1p(-p)) // P(X = 0)
	cdf := 0.0
	for k := uint64(0); k <= n; k++ {
		if 1-cdf <= alpha {
			return k
		}
		cdf += pmf
		pmf *= (nf - float64(k)) / float64(k+1) * p / (1 - p)
	}
	return n + 1
}

// bounds returns the lower confidence bounds of the merged values.
func (m *merger) bounds() Bounds {
	var b Bounds
	if m.count == 0 {
		return b
	}
	n := uint64(m.count)
	// Fixed arrays, not slices: Recent reads bounds for every model and
	// component every second.
	var ranks [len(Quantiles)]int64
	var idxs [len(Quantiles)]int
	k := 0
	for i, q := range Quantiles {
		if r, ok := LowerBoundRank(n, q); ok {
			ranks[i] = int64(r)
			b.OK[i] = true
			idxs[k] = i
			k++
		}
	}
	idx := idxs[:k]
	if k == 0 {
		return b
	}
	var vs []int64
	var rs, out [len(Quantiles)]int64
	switch {
	case !m.hist:
		for j, i := range idx {
			rs[j] = ranks[i]
		}
		vs = rawAtRanksInto(m.raw, m.zeros, rs[:k], out[:k])
	default:
		pcts := make([]float64, len(idx))
		for j, i := range idx {
			pcts[j] = 100 * float64(ranks[i]) / float64(n)
		}
		if m.dense {
			vs = m.d.ValueAtPercentilesSlice(pcts)
		} else {
			vs = m.p.ValueAtPercentilesSlice(pcts)
		}
	}
	for j, i := range idx {
		b.Lower[i] = min(fromMicros(vs[j]), time.Duration(m.max))
	}
	return b
}

// rawAtRanks answers, for each rank (1-based, ascending), what an HDR
// histogram holding the values of bucket indexes raw and zeros zero values
// answers: the top of the bucket at that rank. It sorts raw in place.
func rawAtRanks(raw []uint16, zeros int64, ranks []int64) []int64 {
	return rawAtRanksInto(raw, zeros, ranks, make([]int64, len(ranks)))
}

// rawAtRanksInto is rawAtRanks writing into out (len(ranks) long), so
// that a caller with a fixed number of ranks allocates nothing.
func rawAtRanksInto(raw []uint16, zeros int64, ranks, out []int64) []int64 {
	sortIndexes(raw)
	total := int64(len(raw)) + zeros
	if total == 0 {
		clear(out)
		return out
	}
	for i, rank := range ranks {
		rank = min(max(rank, 1), total)
		var v int64
		if rank > zeros {
			v = bucketValue(raw[rank-zeros-1])
		}
		out[i] = highestEquivalent(v)
	}
	return out
}
