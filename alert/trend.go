package alert

import (
	"fmt"
	"math"
	"time"

	"github.com/infergate/infergate/monitor"
)

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

const trendMaxSamples = 120

// trendOutcome samples the quantile of the last trendSampleWindow and
// fits a least-squares line over the trend window: the condition holds
// when the slope, less two standard errors, exceeds the threshold (a
// noisy p99 does not make a trend), and is unknown until the samples span
// most of the window.
func (e *Engine) trendOutcome(f *frame, r *Rule, ci int, cd *cond, model string) outcome {
	k := trendKey{r.Name, ci, model}
	tr := e.trends[k]
	if tr == nil {
		tr = &trendRing{}
		e.trends[k] = tr
	}
	tr.seen = f.now
	step := cd.window / trendMaxSamples
	rs, ok := f.window(r.sel, trendSampleWindow, true)[model]
	if ok && rs.Stats[monitor.ComponentTotal].Count > 0 && f.now.Sub(tr.last) >= step {
		tr.last = f.now
		x := f.now.Sub(e.start).Seconds()
		tr.t = append(tr.t, x)
		tr.v = append(tr.v, rs.Stats[monitor.ComponentTotal].Quantile(monitor.Quantiles[cd.q]).Seconds())
		// Drop what fell out of the window.
		cut := 0
		for cut < len(tr.t) && tr.t[cut] < x-cd.window.Seconds() {
			cut++
		}
		tr.t, tr.v = tr.t[cut:], tr.v[cut:]
	}
	o := outcome{unit: "s/min", threshold: cd.slope * 60}
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

// forgetTrends drops the samples of models not evaluated for a window.
func (e *Engine) forgetTrends(now time.Time) {
	for k, tr := range e.trends {
		if now.Sub(tr.seen) > maxTrendWindow {
			delete(e.trends, k)
		}
	}
}
