package alert

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// LatencySource gives recent per-group statistics; *monitor.Registry is
// one.
type LatencySource interface {
	Recent(n int, group func(monitor.SeriesKey) string) (map[string]monitor.RecentStats, time.Time)
}

// tri is a three-valued truth: a condition holds, does not, or the data
// cannot say (too few calls, no baseline yet).
type tri int8

const (
	unknown tri = iota
	no
	yes
)

func (t tri) String() string { return [...]string{"unknown", "false", "true"}[t] }

// outcome is one condition's verdict for one subject, with its evidence.
type outcome struct {
	holds     tri
	value     float64 // what was measured (seconds, ratio, ...)
	threshold float64
	unit      string // "s", "ratio", "1/s", "s/min", "" (GPU units)
	calls     uint64
	note      string
}

func (o outcome) fmt(v float64) string {
	switch o.unit {
	case "s":
		return fmtSeconds(v)
	case "ratio":
		return fmt.Sprintf("%.2f%%", 100*v)
	case "1/s":
		return fmt.Sprintf("%.3g/s", v)
	case "s/min":
		return fmtSeconds(v) + "/min"
	}
	return fmt.Sprintf("%.3g", v)
}

// frame is one evaluation's view of the data: recent windows are read at
// most once per selection and window, whatever the number of rules.
type frame struct {
	now       time.Time
	src       LatencySource
	slice     time.Duration
	recent    map[string]map[string]monitor.RecentStats
	models    map[string]correlate.ModelState
	gpus      gpu.State
	baselines *baseline.Store
	cfg       *Config
}

// window returns the per-model statistics of sel over w: successful calls
// only when latency, every call when not (error conditions).
func (f *frame) window(sel selector, w time.Duration, latency bool) map[string]monitor.RecentStats {
	n := int((w + f.slice - 1) / f.slice)
	key := fmt.Sprintf("%s\x00%d\x00%v", sel.key(), n, latency)
	if r, ok := f.recent[key]; ok {
		return r
	}
	r, _ := f.src.Recent(n, func(k monitor.SeriesKey) string {
		if latency && k.CodeClass != monitor.CodeClassOK {
			return ""
		}
		if k.Degraded() {
			// Calls the fallback answered say nothing of the model's own
			// health (and would resolve its alert while it is still sick).
			return ""
		}
		if !sel.matches(k) {
			return ""
		}
		return k.Model
	})
	f.recent[key] = r
	return r
}

// subjects returns the models a model rule evaluates this frame: those
// with calls in any of its windows.
func (f *frame) subjects(r *Rule) []string {
	seen := map[string]bool{}
	for _, cd := range r.conds {
		switch cd.kind {
		case KindThreshold, KindBaseline:
			for m := range f.window(r.sel, cd.window, true) {
				seen[m] = true
			}
		case KindTrend:
			for m := range f.window(r.sel, trendSampleWindow, true) {
				seen[m] = true
			}
		case KindErrors:
			for m := range f.window(r.sel, cd.window, false) {
				seen[m] = true
			}
		}
	}
	if len(seen) == 0 {
		// Only GPU or hint conditions: the models the correlator knows.
		for m := range f.models {
			if glob(r.sel.model, m) {
				seen[m] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// evalModel evaluates cd for model.
func (e *Engine) evalModel(f *frame, r *Rule, ci int, cd *cond, model string) outcome {
	switch cd.kind {
	case KindThreshold:
		rs, ok := f.window(r.sel, cd.window, true)[model]
		if !ok {
			return outcome{note: "no calls"}
		}
		if cd.metric == "rate" {
			calls := rs.Stats[monitor.ComponentTotal].Count
			v := float64(calls) / cd.window.Seconds()
			return outcome{holds: triOf(compare(cd.op, v, cd.value)), value: v, threshold: cd.value, unit: "1/s", calls: calls}
		}
		return quantileOutcome(rs, cd, f.cfg, model)
	case KindBaseline:
		rs, ok := f.window(r.sel, cd.window, true)[model]
		if !ok {
			return outcome{note: "no calls"}
		}
		b := f.baselines.Get(model)
		var qs []int
		if cd.bq >= 0 {
			qs = []int{cd.bq}
		}
		v := baseline.Up(b, rs, cd.rise, qs...)
		o := outcome{unit: "s", calls: rs.Stats[monitor.ComponentTotal].Count, value: v.Lower.Seconds(), threshold: v.Threshold.Seconds()}
		switch {
		case !b.Known():
			o.note = "baseline still learning"
		case !v.Decided:
			o.note = "too few calls to bound the quantiles"
		default:
			o.holds = triOf(v.Up)
			o.note = fmt.Sprintf("%s lower bound vs baseline %s (%s, %d weeks)", baseline.QuantileNames[v.Quantile],
				fmtSeconds(b.Q[v.Quantile].Median), b.Source, b.Weeks)
		}
		return o
	case KindTrend:
		return e.trendOutcome(f, r, ci, cd, model)
	case KindErrors:
		rs, ok := f.window(r.sel, cd.window, false)[model]
		if !ok {
			return outcome{note: "no calls"}
		}
		return errorOutcome(rs, cd)
	case KindGPU:
		ms, ok := f.models[model]
		if !ok || ms.GPU == nil {
			return outcome{note: "no GPU reading for the model"}
		}
		return gpuOutcome(*ms.GPU, cd)
	case KindHint:
		ms, ok := f.models[model]
		if !ok {
			return outcome{note: "no correlation for the model"}
		}
		return outcome{holds: triOf(slices.Contains(cd.hints, ms.Hint)), note: "cause hint " + ms.Hint}
	}
	return outcome{}
}

func triOf(b bool) tri {
	if b {
		return yes
	}
	return no
}

// quantileOutcome compares a quantile with a threshold through its lower
// confidence bound: "above" needs evidence, one slow call is none.
func quantileOutcome(rs monitor.RecentStats, cd *cond, cfg *Config, model string) outcome {
	st := rs.Stats[monitor.ComponentTotal]
	b := rs.Bounds[monitor.ComponentTotal]
	o := outcome{unit: "s", calls: st.Count, threshold: cd.value}
	if cd.useSLO {
		slo, ok := cfg.sloFor(model)
		limit := [...]time.Duration{slo.P50, slo.P90, slo.P99}[cd.q]
		if !ok || limit <= 0 {
			o.note = "no " + cd.quantile + " SLO for the model"
			return o
		}
		o.threshold = limit.Seconds()
	}
	point := monitor.Stats.Quantile(st, monitor.Quantiles[cd.q]).Seconds()
	if !b.OK[cd.q] {
		o.value = point
		need := uint64(0)
		for n := st.Count; n < 1<<20; n = n*2 + 1 {
			if _, ok := monitor.LowerBoundRank(n, monitor.Quantiles[cd.q]); ok {
				need = n
				break
			}
		}
		o.note = fmt.Sprintf("too few calls: %d (a %s needs about %d)", st.Count, cd.quantile, need)
		return o
	}
	switch cd.op {
	case ">", ">=":
		o.value = b.Lower[cd.q].Seconds()
		o.note = fmt.Sprintf("%s lower bound (point %s)", cd.quantile, fmtSeconds(point))
	default:
		o.value = point
	}
	o.holds = triOf(compare(cd.op, o.value, o.threshold))
	return o
}

// errorOutcome compares a failure ratio (its Wilson lower bound at the
// monitor's confidence) or rate with the condition's.
func errorOutcome(rs monitor.RecentStats, cd *cond) outcome {
	n := rs.Stats[monitor.ComponentTotal].Count
	failed := rs.FailedOf(cd.codes)
	o := outcome{calls: n}
	if cd.rate > 0 {
		o.unit, o.threshold = "1/s", cd.rate
		o.value = float64(failed) / cd.window.Seconds()
		o.holds = triOf(o.value > cd.rate)
		o.note = fmt.Sprintf("%d failed of %d", failed, n)
		return o
	}
	o.unit, o.threshold = "ratio", cd.ratio
	o.value = float64(failed) / math.Max(float64(n), 1)
	if n < cd.minCalls {
		o.note = fmt.Sprintf("too few calls: %d of %d needed", n, cd.minCalls)
		return o
	}
	lb := wilsonLower(failed, n)
	o.holds = triOf(lb > cd.ratio)
	o.note = fmt.Sprintf("%d failed of %d (lower bound %.2f%%)", failed, n, 100*lb)
	return o
}

// wilsonLower is the Wilson score lower bound of k successes in n at three
// standard deviations, the confidence monitor's quantile bounds use.
func wilsonLower(k, n uint64) float64 {
	if n == 0 {
		return 0
	}
	const z = 3.0
	nf := float64(n)
	p := float64(k) / nf
	den := 1 + z*z/nf
	center := p + z*z/(2*nf)
	hw := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return math.Max(0, (center-hw)/den)
}

func gpuOutcome(d gpu.Device, cd *cond) outcome {
	o := outcome{threshold: cd.value}
	switch cd.field {
	case "utilization":
		if !d.Has(gpu.FieldUtilization) {
			return outcome{note: "utilization not reported"}
		}
		o.value, o.unit = d.Utilization, "ratio"
	case "memory_ratio":
		r, ok := d.MemoryRatio()
		if !ok {
			return outcome{note: "memory not reported"}
		}
		o.value, o.unit = r, "ratio"
	case "temperature":
		if !d.Has(gpu.FieldTemperature) {
			return outcome{note: "temperature not reported"}
		}
		o.value = d.TemperatureCelsius
	case "throttled":
		if d.Throttled() {
			o.value = 1
		}
		o.note = strings.Join(d.ActiveReasons(), ",")
	}
	o.holds = triOf(compare(cd.op, o.value, cd.value))
	return o
}

// combine folds a rule's condition outcomes.
func combine(mode string, os []outcome) tri {
	if mode == "" || len(os) == 1 {
		return os[0].holds
	}
	all := mode == "all"
	res := yes
	if !all {
		res = no
	}
	for _, o := range os {
		switch {
		case all && o.holds == no, !all && o.holds == yes:
			return o.holds
		case o.holds == unknown:
			res = unknown
		}
	}
	return res
}
