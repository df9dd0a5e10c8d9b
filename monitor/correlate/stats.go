package correlate

import (
	"math"
	"slices"
)

// pearson returns the correlation of xs and ys (same length), or NaN with
// fewer than 3 pairs or when either side has no variance.
func pearson(xs, ys []float64) float64 {
	n := len(xs)
	if n < 3 || len(ys) != n {
		return math.NaN()
	}
	var mx, my float64
	for i := range n {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var sxy, sxx, syy float64
	for i := range n {
		dx, dy := xs[i]-mx, ys[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	// Relative floors: floating-point noise on a constant series must not
	// pass for variance.
	if sxx <= 1e-12*math.Max(1, mx*mx)*float64(n) || syy <= 1e-12*math.Max(1, my*my)*float64(n) {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// stddev returns the population standard deviation of xs (0 when empty).
func stddev(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(xs)))
}

// median returns the median of xs (0 when empty); xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
