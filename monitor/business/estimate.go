package business

import "math"

// MinPairs is the fewest paired samples a correlation is given for: with
// fewer, the best of 41 lags is a large r by chance alone.
const MinPairs = 20

// Estimate is the strongest correlation between a model's p99 and the
// metric over the lags searched.
type Estimate struct {
	// Correlation is Pearson's r of p99[t] and metric[t+Lag], in [-1, 1]:
	// negative when the metric falls as latency rises (conversion).
	Correlation float64
	// Lag is in steps: positive when the metric follows latency.
	Lag int
	// Samples is how many (p99, metric) pairs r was computed over.
	Samples int
}

// EstimateLag returns Pearson's r between x[t] and y[t+lag] for the lag
// in [-maxLag, maxLag] whose |r| is largest: the sign is kept, since a
// business metric that falls with latency is as telling as one that
// rises. NaN marks a missing sample; a pair with one is skipped. Lags
// are tried nearest to 0 first and a farther one must beat the best
// strictly, so a flat stretch of r resolves to the smallest lag. ok is
// false when no lag had MinPairs pairs with variance on both sides.
//
// x and y are aligned: index i of both is the same read.
func EstimateLag(x, y []float64, maxLag int) (e Estimate, ok bool) {
	best := -1.0
	for k := 0; k <= 2*maxLag; k++ {
		lag := (k + 1) / 2
		if k%2 == 0 {
			lag = -lag
		}
		r, n := pearsonAt(x, y, lag)
		if n < MinPairs || math.IsNaN(r) {
			continue
		}
		if a := math.Abs(r); a > best+1e-12 {
			best, e, ok = a, Estimate{Correlation: r, Lag: lag, Samples: n}, true
		}
	}
	return e, ok
}

// pearsonAt is r over the pairs (x[i], y[i+lag]) with both present; NaN
// when either side is constant.
func pearsonAt(x, y []float64, lag int) (float64, int) {
	var n, sx, sy, sxx, syy, sxy float64
	for i := range x {
		j := i + lag
		if j < 0 || j >= len(y) || math.IsNaN(x[i]) || math.IsNaN(y[j]) {
			continue
		}
		a, b := x[i], y[j]
		n++
		sx += a
		sy += b
		sxx += a * a
		syy += b * b
		sxy += a * b
	}
	if n < 2 {
		return math.NaN(), int(n)
	}
	cov := sxy - sx*sy/n
	vx := sxx - sx*sx/n
	vy := syy - sy*sy/n
	if vx <= 1e-18*math.Max(1, sxx) || vy <= 1e-18*math.Max(1, syy) {
		return math.NaN(), int(n)
	}
	return max(-1, min(1, cov/math.Sqrt(vx*vy))), int(n)
}
