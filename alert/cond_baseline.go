package alert

import (
	"fmt"
	"math"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
)

// KindBaseline compares a quantile with the model's shared seasonal
// baseline (monitor/baseline): the notion of "latency up" the cause hints
// use.
const KindBaseline = "baseline"

// baselineCond is a compiled baseline condition: baseline.Up over the
// successful calls of window. It is unknown while the baseline learns
// and while the calls are too few to bound the quantiles.
type baselineCond struct {
	window time.Duration
	// bq is the quantile (index in baseline quantiles); -1 means any of
	// p50, p90 and p99.
	bq   int
	rise baseline.Rise
}

func parseBaseline(cc *Condition, cm condCommon, _ *Config) (condition, error) {
	if cc.Metric != "" {
		// The seasonal baselines learn the calls' latency only; a
		// metric here would silently judge that instead.
		return nil, fmt.Errorf("metric: %q, baseline conditions read the calls' latency (use threshold for stream metrics)", cc.Metric)
	}
	// No quantile: any of p50, p90 and p99, the notion of "latency up"
	// the cause hints use.
	cd := &baselineCond{bq: -1}
	if cc.Quantile != "" {
		q, err := parseQuantile(cc.Quantile, "p50", "p90", "p99")
		if err != nil {
			return nil, err
		}
		cd.bq = q
	}
	w, err := recentWindow(cm.window, defaultLatencyWindow)
	if err != nil {
		return nil, err
	}
	cd.window = w
	if cc.AbovePercent < 0 || math.IsNaN(cc.AbovePercent) || math.IsInf(cc.AbovePercent, 0) {
		return nil, fmt.Errorf("above_percent: %v, must be a finite number, not negative", cc.AbovePercent)
	}
	cd.rise = baseline.DefaultRise
	if cc.AbovePercent > 0 {
		cd.rise = baseline.Rise{Factor: 1 + cc.AbovePercent/100, Band: -1, Min: time.Millisecond}
	}
	if cm.op != ">" {
		return nil, fmt.Errorf("op: baseline conditions are 'above'")
	}
	return cd, nil
}

func (cd *baselineCond) kind() string { return KindBaseline }

func (cd *baselineCond) models(f *frame, sel selector, seen map[string]bool) {
	f.addModels(sel, cd.window, true, seen)
}

func (cd *baselineCond) eval(f *frame, r *Rule, _ int, model string) outcome {
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
	o := outcome{unit: "s", calls: rs.Stats[monitor.ComponentTotal].Count, value: v.Lower.Seconds(), threshold: v.Threshold.Seconds(),
		op: ">", measure: baseline.QuantileNames[v.Quantile], bound: "its baseline bound"}
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
}
