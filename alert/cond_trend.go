package alert

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor"
)

// KindTrend holds when a quantile's least-squares slope, less two
// standard errors, exceeds a rate of change such as 10ms/min.
const KindTrend = "trend"

// Defaults and limits of trend conditions.
const (
	defaultTrendWindow = 5 * time.Minute
	maxTrendWindow     = time.Hour
	// trendSampleWindow is the window of each quantile a trend regresses.
	trendSampleWindow = 10 * time.Second
	trendMaxSamples   = 120
)

// trendCond is a compiled trend condition.
type trendCond struct {
	op       string
	quantile string
	q        int           // index in monitor.Quantiles
	window   time.Duration // of the regression
	slope    float64       // seconds per second
}

func parseTrend(cc *Condition, cm condCommon, _ *Config) (condition, error) {
	q, err := parseQuantile(cc.Quantile)
	if err != nil {
		return nil, err
	}
	cd := &trendCond{op: cm.op, quantile: cc.Quantile, q: q, window: cm.window}
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
	f.addModels(sel, trendSampleWindow, true, seen)
}

// eval samples the quantile of the last trendSampleWindow and fits a
// least-squares line over the trend window: the condition holds when the
// slope, less two standard errors, exceeds the threshold (a noisy p99
// does not make a trend), and is unknown until the samples span most of
// the window.
func (cd *trendCond) eval(f *frame, r *Rule, i int, model string) outcome {
	tr := f.trends.ring(trendKey{r.Name, i, model}, f.now)
	step := cd.window / trendMaxSamples
	rs, ok := f.window(r.sel, trendSampleWindow, true)[model]
	if ok && rs.Stats[monitor.ComponentTotal].Count > 0 && f.now.Sub(tr.last) >= step {
		tr.last = f.now
		x := f.now.Sub(f.trends.start).Seconds()
		tr.t = append(tr.t, x)
		tr.v = append(tr.v, rs.Stats[monitor.ComponentTotal].Quantile(monitor.Quantiles[cd.q]).Seconds())
		// Drop what fell out of the window.
		cut := 0
		for cut < len(tr.t) && tr.t[cut] < x-cd.window.Seconds() {
			cut++
		}
		tr.t, tr.v = tr.t[cut:], tr.v[cut:]
	}
	o := outcome{unit: "s/min", threshold: cd.slope * 60, op: cd.op, measure: cd.quantile + " slope", bound: "its bound"}
	n := len(tr.t)
	if n < 10 || tr.t[n-1]-tr.t[0] < 0.8*cd.window.Seconds() {
		o.note = fmt.Sprintf("collecting: %d samples over %.0fs of %v", n, span(tr.t), cd.window)
		return o
	}
	slope, se := fitSlope(tr.t, tr.v)
	o.value = slope * 60
	o.note = fmt.Sprintf("%s slope over %v, ±%s/min (2 SE), %d samples", cd.quantile, cd.window, fmtSeconds(2*se*60), n)
	switch cd.op {
	case ">", ">=":
		o.holds = triOf(slope-2*se > cd.slope)
	default:
		o.holds = triOf(slope+2*se < cd.slope)
	}
	return o
}

// trendKey names one trend condition's samples of one model.
type trendKey struct {
	rule  string
	cond  int
	model string
}

// trendRing holds a quantile's samples over a trend window, at most
// trendMaxSamples of them (spaced window/trendMaxSamples apart).
type trendRing struct {
	t    []float64 // seconds since start
	v    []float64 // seconds
	last time.Time
	seen time.Time
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
