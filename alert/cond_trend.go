package alert

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
)

// KindTrend holds when a quantile rises (or falls) faster than a rate
// of change such as 10ms/min, with confidence: the lower bound of its
// Theil–Sen slope is over the rate.
const KindTrend = "trend"

// Why Theil–Sen with Sen's interval, and not least squares or a CUSUM
// (issue 47, "creep"):
//
//   - Least squares over the whole window (what this rule did) needs the
//     window mostly filled with the creep before its slope, diluted by
//     the calm seconds before the onset, passes the bound: +10 ms a
//     minute took 3m26s. Theil–Sen is tested here over nested spans
//     ending now (30 s, 1 m, 2 m, ... the window), so a creep that began
//     a minute ago is judged on that minute alone.
//   - The slope is the median of the pairwise slopes: a few slow seconds
//     (a GC pause, one slow batch) move it little, where they drag a
//     least-squares line (breakdown point 29% against 0%).
//   - Its confidence interval comes from Kendall's S without any
//     assumption on the noise's distribution (p99s are skewed and
//     lumpy), and it says the slope in the rule's own unit, ms/min.
//   - A CUSUM on the baseline residual would be as fast, but it answers
//     "the level moved", which a step does as well as a creep: that is
//     the baseline rule's question. Here a step is told apart from a
//     creep by the two halves of the span: a creep rises in both, a
//     step in at most one.
//
// Cost per model and second: one sample appended and, per span, a
// least-squares slope over at most trendMaxPoints points as a screen;
// only a span whose screen passes sorts its pairwise slopes (at most
// 1,770). A flat model costs a few hundred floating-point operations a
// second.

// Defaults and limits of trend conditions.
const (
	defaultTrendWindow = 5 * time.Minute
	maxTrendWindow     = time.Hour
	// trendSampleWindow is the window of each sample: the quantile of
	// the last 5 s, taken every second. A second's p99 at 100 calls/s is
	// its slowest call or two, and jumps by the tail's width from one
	// second to the next; five seconds hold enough calls for a p99 that
	// moves with the model. The samples overlap, which the interval
	// accounts for (trendOverlap).
	trendSampleWindow = 5 * time.Second
	// trendMaxSamples bounds a ring: samples are spaced
	// window/trendMaxSamples apart, one a second up to 5m windows.
	trendMaxSamples = 300
	// trendMinSpan is the shortest span tested.
	trendMinSpan = 30 * time.Second
	// trendMaxPoints bounds the points of one Theil–Sen fit (thinned
	// evenly past it): 1,770 pairwise slopes.
	trendMaxPoints = 60
	// trendZ is the normal quantile of the one-sided bound: 99%. Each
	// span is tested every second, so a bound at 95% would be crossed by
	// noise now and then.
	trendZ = 2.326
)

// trendCond is a compiled trend condition.
type trendCond struct {
	op       string
	quantile string
	q        int           // index in monitor.Quantiles
	bq       int           // index in baseline quantiles; -1 for p999
	window   time.Duration // of the longest span
	slope    float64       // seconds per second
}

func parseTrend(cc *Condition, cm condCommon, _ *Config) (condition, error) {
	q, err := parseQuantile(cc.Quantile)
	if err != nil {
		return nil, err
	}
	cd := &trendCond{op: cm.op, quantile: cc.Quantile, q: q, bq: -1, window: cm.window}
	for i, n := range baseline.QuantileNames {
		if n == cc.Quantile {
			cd.bq = i
		}
	}
	if cd.window == 0 {
		cd.window = defaultTrendWindow
	}
	if cd.window < time.Minute || cd.window > maxTrendWindow {
		return nil, fmt.Errorf("window: %v, want 1m to %v", cd.window, maxTrendWindow)
	}
	if cd.slope, err = parseSlope(cc.Slope); err != nil {
		return nil, fmt.Errorf("slope: %v", err)
	}
	return cd, nil
}

func (cd *trendCond) kind() string { return KindTrend }

func (cd *trendCond) models(f *frame, sel selector, seen map[string]bool) {
	f.addModels(sel, cd.sampleWindow(), true, seen)
}

// step is the spacing of the samples.
func (cd *trendCond) step() time.Duration {
	return max(time.Second, cd.window/trendMaxSamples)
}

// sampleWindow is the window of each sample: 5 s, or the step when
// samples are further apart (each second's calls counted once).
func (cd *trendCond) sampleWindow() time.Duration { return max(trendSampleWindow, cd.step()) }

// eval samples the quantile of the last sampleWindow every step, less
// the model's seasonal baseline level when it has one (the residual: at
// a compressed clock, and at a steep morning ramp, the day's own shape is
// not a creep), and tests Theil–Sen slopes over spans ending now.
func (cd *trendCond) eval(f *frame, r *Rule, i int, model string) outcome {
	tr := f.trends.ring(trendKey{r.Name, i, model}, f.now)
	step := cd.step()
	rs, ok := f.window(r.sel, cd.sampleWindow(), true)[model]
	o := outcome{unit: "s/min", threshold: cd.slope * 60, op: cd.op, measure: cd.quantile + " slope", bound: "its bound"}
	if ok && rs.Stats[monitor.ComponentTotal].Count > 0 && f.now.Sub(tr.last) >= step-step/10 {
		tr.last = f.now
		x := f.now.Sub(f.trends.start).Seconds()
		v := rs.Stats[monitor.ComponentTotal].Quantile(monitor.Quantiles[cd.q]).Seconds()
		if b := f.baselines.Get(model); cd.bq >= 0 && b.Source == baseline.SourceSeasonal {
			v -= b.Q[cd.bq].Median
		}
		tr.t = append(tr.t, x)
		tr.v = append(tr.v, v)
		// Drop what fell out of the window.
		cut := 0
		for cut < len(tr.t) && tr.t[cut] <= x-cd.window.Seconds() {
			cut++
		}
		tr.t, tr.v = tr.t[cut:], tr.v[cut:]
	}
	if len(tr.t) == 0 {
		o.note = "collecting: no samples"
		return o
	}
	// Overlap: each sample's calls are in sampleWindow/step samples.
	overlap := cd.sampleWindow().Seconds() / step.Seconds()
	now := tr.t[len(tr.t)-1]
	var judged *trendFit
	for span := trendMinSpan; ; span *= 2 {
		if span >= cd.window {
			span = cd.window
		}
		fit, ok := tr.fit(now, span.Seconds(), step.Seconds(), overlap, cd)
		if ok {
			judged = &fit
			if fit.holds {
				break
			}
		}
		if span == cd.window {
			break
		}
	}
	if judged == nil {
		o.note = fmt.Sprintf("collecting: %d samples over %.0fs of %v", len(tr.t), span(tr.t), trendMinSpan)
		return o
	}
	o.value = judged.slope * 60
	o.holds = triOf(judged.holds)
	o.note = judged.note(cd)
	return o
}

// trendFit is one span's verdict.
type trendFit struct {
	span  float64 // seconds
	n     int
	slope float64 // seconds per second: Theil–Sen, or least squares when screened out
	bound float64 // the one-sided 99% bound (lower for >, upper for <); NaN when screened out
	// lineSSE and stepSSE are the squared residuals of the best line
	// and of the best step; 0 when not computed.
	lineSSE, stepSSE float64
	holds            bool
}

func (ft trendFit) note(cd *trendCond) string {
	what := cd.quantile
	if cd.bq >= 0 {
		what += " (less its seasonal baseline when it has one)"
	}
	if math.IsNaN(ft.bound) {
		return fmt.Sprintf("%s least-squares slope over the last %.0fs, %d samples: not past the bound, no robust fit needed", what, ft.span, ft.n)
	}
	s := fmt.Sprintf("%s Theil–Sen slope over the last %.0fs, %d samples; 99%% bound %s/min", what, ft.span, ft.n, fmtSeconds(ft.bound*60))
	if !ft.holds && past(cd.op, ft.bound, cd.slope) {
		s += "; a step fits better than a line: a step, not a trend"
	}
	return s
}

// past says whether v is past t in the direction of op.
func past(op string, v, t float64) bool {
	if strings.HasPrefix(op, "<") {
		return v < t
	}
	return v > t
}

// fit judges the samples of the last span seconds (up to now), spaced
// step apart, each sharing its calls with overlap others; ok is false
// while they cover less than 80% of the span.
func (tr *trendRing) fit(now, span, step, overlap float64, cd *trendCond) (trendFit, bool) {
	from := len(tr.t)
	for from > 0 && tr.t[from-1] > now-span {
		from--
	}
	n := len(tr.t) - from
	if n < 10 || float64(n) < 0.8*span/step {
		return trendFit{}, false
	}
	// Thin evenly to at most trendMaxPoints, keeping the latest sample.
	k := (n + trendMaxPoints - 1) / trendMaxPoints
	ts, vs := tr.bufT[:0], tr.bufV[:0]
	for j := len(tr.t) - 1; j >= from; j -= k {
		ts, vs = append(ts, tr.t[j]), append(vs, tr.v[j])
	}
	tr.bufT, tr.bufV = ts, vs
	overlap = max(1, overlap/float64(k))
	ft := trendFit{span: span, n: len(ts), bound: math.NaN()}
	// The screen: a least-squares slope not even half-way past the bound
	// leaves no Theil–Sen bound past it.
	ls, _ := fitSlope(ts, vs)
	half := cd.slope - math.Abs(cd.slope)/2
	if strings.HasPrefix(cd.op, "<") {
		half = cd.slope + math.Abs(cd.slope)/2
	}
	ft.slope = ls
	if !past(cd.op, ls, half) {
		return ft, true
	}
	var lo, hi float64
	ft.slope, lo, hi, tr.bufS = theilSen(ts, vs, overlap, tr.bufS)
	ft.bound = lo
	if strings.HasPrefix(cd.op, "<") {
		ft.bound = hi
	}
	if !past(cd.op, ft.bound, cd.slope) {
		return ft, true
	}
	// A step inside the span makes a Theil–Sen slope too (the pairs
	// across it). A creep is told from a step by which of the two
	// describes the span better: a line, or two levels split where they
	// fit best (least squares, both with two free parameters; the
	// step's split is chosen, which favours it slightly, as it should:
	// a rule that pages on a step is worse than one a few seconds late
	// on a creep).
	ft.lineSSE, ft.stepSSE = lineSSE(ts, vs), stepSSE(vs)
	ft.holds = ft.lineSSE < ft.stepSSE
	return ft, true
}

// lineSSE is the sum of squared residuals of v's least-squares line
// over t.
func lineSSE(t, v []float64) float64 {
	slope, _ := fitSlope(t, v)
	var mt, mv float64
	for i := range t {
		mt += t[i]
		mv += v[i]
	}
	mt /= float64(len(t))
	mv /= float64(len(t))
	var ss float64
	for i := range t {
		r := v[i] - mv - slope*(t[i]-mt)
		ss += r * r
	}
	return ss
}

// stepSSE is the least sum of squared residuals of v (in time order,
// either way) about two levels, one before a split and one after, each
// of at least two points.
func stepSSE(v []float64) float64 {
	var sum, sq float64
	for _, x := range v {
		sum += x
		sq += x * x
	}
	n := len(v)
	best := math.Inf(1)
	var ls, lq float64
	for k := 1; k <= n-2; k++ {
		ls += v[k-1]
		lq += v[k-1] * v[k-1]
		if k < 2 {
			continue
		}
		rs, rq := sum-ls, sq-lq
		sse := lq - ls*ls/float64(k) + rq - rs*rs/float64(n-k)
		best = min(best, sse)
	}
	return best
}

// theilSen returns the median of the pairwise slopes of v over t and
// Sen's two-sided 98% interval (one-sided 99% bounds) from the variance
// of Kendall's S, n(n-1)(2n+5)/18, times overlap: samples that share
// calls vary together, and S of n such samples varies about as much as
// that of n×overlap independent ones would (lo is -Inf, hi +Inf when the
// points are too few for a bound). buf is reused for the slopes.
func theilSen(t, v []float64, overlap float64, buf []float64) (slope, lo, hi float64, _ []float64) {
	s := buf[:0]
	for i := range t {
		for j := i + 1; j < len(t); j++ {
			if dt := t[j] - t[i]; dt != 0 {
				s = append(s, (v[j]-v[i])/dt)
			}
		}
	}
	if len(s) == 0 {
		return 0, math.Inf(-1), math.Inf(1), s
	}
	slices.Sort(s)
	N := len(s)
	slope = s[N/2]
	if N%2 == 0 {
		slope = (s[N/2-1] + s[N/2]) / 2
	}
	n := float64(len(t))
	c := trendZ * math.Sqrt(n*(n-1)*(2*n+5)/18*overlap)
	lo, hi = math.Inf(-1), math.Inf(1)
	if m1 := int(math.Floor((float64(N) - c) / 2)); m1 >= 1 {
		lo = s[m1-1]
		hi = s[N-m1]
	}
	return slope, lo, hi, s
}

// trendKey names one trend condition's samples of one model.
type trendKey struct {
	rule  string
	cond  int
	model string
}

// trendRing holds a quantile's samples over a trend window, at most
// trendMaxSamples of them (spaced window/trendMaxSamples apart), and
// the buffers its fits reuse.
type trendRing struct {
	t    []float64 // seconds since start
	v    []float64 // seconds
	last time.Time
	seen time.Time
	// bufT, bufV and bufS are reused by fit: the thinned points and the
	// pairwise slopes.
	bufT, bufV, bufS []float64
}

// trendStore is what trend conditions remember between evaluations: the
// samples of each (rule, condition, model), timed from start.
type trendStore struct {
	start time.Time
	rings map[trendKey]*trendRing
}

func newTrendStore(start time.Time) *trendStore {
	return &trendStore{start: start, rings: map[trendKey]*trendRing{}}
}

// ring returns k's samples, marked as seen at now.
func (s *trendStore) ring(k trendKey, now time.Time) *trendRing {
	tr := s.rings[k]
	if tr == nil {
		tr = &trendRing{}
		s.rings[k] = tr
	}
	tr.seen = now
	return tr
}

// forget drops the samples of models not evaluated for a window.
func (s *trendStore) forget(now time.Time) {
	for k, tr := range s.rings {
		if now.Sub(tr.seen) > maxTrendWindow {
			delete(s.rings, k)
		}
	}
}

func span(t []float64) float64 {
	if len(t) < 2 {
		return 0
	}
	return t[len(t)-1] - t[0]
}

// fitSlope returns the least-squares slope of v over t and its standard
// error.
func fitSlope(t, v []float64) (slope, se float64) {
	n := float64(len(t))
	var mt, mv float64
	for i := range t {
		mt += t[i]
		mv += v[i]
	}
	mt /= n
	mv /= n
	var stt, stv float64
	for i := range t {
		stt += (t[i] - mt) * (t[i] - mt)
		stv += (t[i] - mt) * (v[i] - mv)
	}
	if stt == 0 {
		return 0, math.Inf(1)
	}
	slope = stv / stt
	var ss float64
	for i := range t {
		r := v[i] - (mv + slope*(t[i]-mt))
		ss += r * r
	}
	if n > 2 {
		se = math.Sqrt(ss / (n - 2) / stt)
	}
	return slope, se
}

// parseSlope reads "10ms/min", "1ms/s", "0.5s/h" as seconds per second.
func parseSlope(s string) (float64, error) {
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("%q is not a rate like 10ms/min", s)
	}
	d, err := time.ParseDuration(num)
	if err != nil {
		return 0, fmt.Errorf("%q is not a rate like 10ms/min", s)
	}
	var unit time.Duration
	switch per {
	case "s", "sec":
		unit = time.Second
	case "m", "min":
		unit = time.Minute
	case "h":
		unit = time.Hour
	default:
		return 0, fmt.Errorf("%q: per %q, want s, min or h", s, per)
	}
	return d.Seconds() / unit.Seconds(), nil
}
