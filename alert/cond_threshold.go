package alert

import (
	"fmt"
	"time"

	"github.com/infergate/infergate/monitor"
)

// KindThreshold compares a quantile (against a duration or the model's
// SLO) or the call rate with a value; metric: error_ratio makes an errors
// condition of it.
const KindThreshold = "threshold"

// Defaults of threshold conditions.
const defaultLatencyWindow = 10 * time.Second

// thresholdCond is a compiled threshold condition: a quantile of the
// successful calls over window, through its lower confidence bound when
// "above" (one slow call is no evidence), or their rate (metric rate).
type thresholdCond struct {
	op       string
	window   time.Duration
	metric   string // "" (a quantile) or "rate"
	quantile string
	q        int     // index in monitor.Quantiles
	value    float64 // seconds, or calls per second
	useSLO   bool    // value: slo
}

func parseThreshold(cc *Condition, cm condCommon, c *Config) (condition, error) {
	w, err := recentWindow(cm.window, defaultLatencyWindow)
	if err != nil {
		return nil, err
	}
	cd := &thresholdCond{op: cm.op, window: w, quantile: cc.Quantile}
	switch {
	case cc.Metric == "" && cc.Quantile != "":
		if cd.q, err = parseQuantile(cc.Quantile); err != nil {
			return nil, err
		}
		if cc.Value == "slo" {
			cd.useSLO = true
			if len(c.SLO) == 0 {
				return nil, fmt.Errorf("value: slo, but no slo: section sets one")
			}
			if cc.Quantile == "p999" {
				return nil, fmt.Errorf("value: slo has no p999")
			}
			return cd, nil
		}
		d, err := time.ParseDuration(cc.Value)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("value: %q, want a duration like 500ms or slo", cc.Value)
		}
		cd.value = d.Seconds()
	case cc.Metric == "rate" || cc.Metric == "error_ratio":
		if cc.Quantile != "" {
			return nil, fmt.Errorf("quantile and metric: set one")
		}
		v, err := parseRatio(cc.Value)
		switch {
		case err != nil:
			return nil, fmt.Errorf("value: %v", err)
		case v < 0:
			return nil, fmt.Errorf("value: %q, must not be negative", cc.Value)
		case cc.Metric == "error_ratio" && v > 1:
			return nil, fmt.Errorf("value: %q, an error ratio is between 0 and 100%%", cc.Value)
		}
		if cc.Metric == "error_ratio" {
			return newErrorRatio(w, nil, v, cm.minCalls), nil
		}
		cd.metric, cd.value = cc.Metric, v
	case streamMetrics[cc.Metric] != nil:
		return parseStreamQuantile(cc, cm, w)
	default:
		return nil, fmt.Errorf("quantile: missing (or metric: rate | error_ratio | %s)", streamMetricList())
	}
	return cd, nil
}

func (cd *thresholdCond) kind() string { return KindThreshold }

func (cd *thresholdCond) models(f *frame, sel selector, seen map[string]bool) {
	f.addModels(sel, cd.window, true, seen)
}

func (cd *thresholdCond) eval(f *frame, r *Rule, _ int, model string) outcome {
	rs, ok := f.window(r.sel, cd.window, true)[model]
	if !ok {
		return outcome{note: "no calls"}
	}
	if cd.metric == "rate" {
		calls := rs.Stats[monitor.ComponentTotal].Count
		v := float64(calls) / cd.window.Seconds()
		return outcome{holds: triOf(compare(cd.op, v, cd.value)), value: v, threshold: cd.value, unit: "1/s", calls: calls,
			op: cd.op, measure: "calls", bound: "its bound"}
	}
	return cd.quantileOutcome(rs, f.cfg, model)
}

// quantileOutcome compares a quantile with a threshold through its lower
// confidence bound: "above" needs evidence, one slow call is none.
func (cd *thresholdCond) quantileOutcome(rs monitor.RecentStats, cfg *Config, model string) outcome {
	st := rs.Stats[monitor.ComponentTotal]
	threshold, bound := cd.value, "its bound"
	if cd.useSLO {
		bound = "its SLO"
		slo, ok := cfg.sloFor(model)
		limit := [...]time.Duration{slo.P50, slo.P90, slo.P99}[cd.q]
		if !ok || limit <= 0 {
			return outcome{unit: "s", calls: st.Count, note: "no " + cd.quantile + " SLO for the model"}
		}
		threshold = limit.Seconds()
	}
	qc := quantileCheck{op: cd.op, quantile: cd.quantile, q: cd.q, threshold: threshold,
		value: time.Duration.Seconds, unit: "s", noun: "calls", measure: cd.quantile, bound: bound}
	return qc.outcome(st, rs.Bounds[monitor.ComponentTotal])
}

// quantileCheck compares one quantile of a distribution with a threshold.
type quantileCheck struct {
	op, quantile string
	q            int     // index in monitor.Quantiles
	threshold    float64 // in value's unit
	// value converts a Stats value into the threshold's unit, named unit
	// in the evidence; noun names what the Stats count.
	value      func(time.Duration) float64
	unit, noun string
	// measure and bound name the value and the threshold in the
	// summary ("ttfr p99", "its SLO"; "its bound" when empty).
	measure, bound string
}

// outcome judges st through its lower confidence bounds b: "above" needs
// evidence, one slow value is none.
func (qc quantileCheck) outcome(st monitor.Stats, b monitor.Bounds) outcome {
	o := outcome{unit: qc.unit, calls: st.Count, threshold: qc.threshold, op: qc.op, measure: qc.measure, bound: qc.bound}
	if o.bound == "" {
		o.bound = "its bound"
	}
	point := qc.value(st.Quantile(monitor.Quantiles[qc.q]))
	if !b.OK[qc.q] {
		o.value = point
		need := uint64(0)
		for n := st.Count; n < 1<<20; n = n*2 + 1 {
			if _, ok := monitor.LowerBoundRank(n, monitor.Quantiles[qc.q]); ok {
				need = n
				break
			}
		}
		o.note = fmt.Sprintf("too few %s: %d (a %s needs about %d)", qc.noun, st.Count, qc.quantile, need)
		return o
	}
	switch qc.op {
	case ">", ">=":
		o.value = qc.value(b.Lower[qc.q])
		o.note = fmt.Sprintf("%s lower bound (point %s)", qc.quantile, o.fmt(point))
	default:
		o.value = point
	}
	o.holds = triOf(compare(qc.op, o.value, o.threshold))
	return o
}

// prom is histogram_quantile against the value (one rule per slo: entry
// for value: slo), or the summed call rate.
func (cd *thresholdCond) prom(r *Rule, c *Config) []promExpr {
	sel := promSelector(r.sel)
	window := promDuration(max(cd.window, minPromWindow))
	switch {
	case cd.metric == "rate":
		return []promExpr{{expr: fmt.Sprintf("sum by (model) (rate(infergate_requests_total{%s}[%s])) %s %s", sel, window, cd.op, num(cd.value)),
			threshold: num(cd.value) + "/s", said: said{measure: "calls", unit: "1/s", op: cd.op, bound: "its bound"}}}
	case cd.useSLO:
		var out []promExpr
		q := monitorQuantile(cd.q)
		for _, s := range c.SLO {
			limit := [...]time.Duration{s.P50, s.P90, s.P99}[cd.q]
			if limit <= 0 {
				continue
			}
			ssel := promSelector(selector{model: s.Model, version: r.sel.version, method: r.sel.method, upstream: r.sel.upstream})
			out = append(out, promExpr{expr: quantileExpr(q, ssel, window, cd.op, limit.Seconds()),
				labels: map[string]string{"slo": s.Model}, threshold: limit.String(),
				said: said{measure: cd.quantile, unit: "s", op: cd.op, bound: "its SLO"}})
		}
		return out
	}
	return []promExpr{{expr: quantileExpr(monitorQuantile(cd.q), sel, window, cd.op, cd.value),
		threshold: time.Duration(cd.value * float64(time.Second)).String(),
		said:      said{measure: cd.quantile, unit: "s", op: cd.op, bound: "its bound"}}}
}
