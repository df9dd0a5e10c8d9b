package alert

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor"
)

// KindErrors compares the ratio (or rate) of calls failing with chosen
// gRPC codes with a value.
const KindErrors = "errors"

// Defaults of errors conditions.
const (
	defaultErrorWindow   = 5 * time.Second
	defaultErrorMinCalls = 20
)

// errorsCond is a compiled errors condition (or threshold with metric:
// error_ratio): the Wilson lower bound of the failed fraction of every
// call over window against ratio, or the failed calls per second against
// rate.
//
// A ratio's window grows when it holds fewer than minCalls calls: it
// doubles, up to maxWindow (one minute), until it has them, so a model
// at 5 calls/s that fails is judged on its last 4 seconds instead of
// never. A model without a single call in the grown window
// has no traffic: the condition is false, with "no traffic" in the
// evidence, and its alert resolves (the rule Prometheus follows when a
// series disappears) instead of holding on no verdict.
type errorsCond struct {
	window time.Duration
	codes  []string
	// serverOnly: codes were not given; the condition counts the
	// server's failures only, leaving out the series of calls the client
	// caused (viewServer).
	serverOnly bool
	ratio      float64
	rate       float64 // when > 0, instead of ratio
	minCalls   uint64
}

// newErrorRatio is an errors condition on the ratio; nil codes means the
// server's failures (DefaultServerErrorCodes, client-caused calls left
// out), minCalls 0 the default.
func newErrorRatio(window time.Duration, codes []string, ratio float64, minCalls uint64) *errorsCond {
	if minCalls == 0 {
		minCalls = defaultErrorMinCalls
	}
	cd := &errorsCond{window: window, codes: codes, ratio: ratio, minCalls: minCalls}
	if codes == nil {
		cd.codes, cd.serverOnly = DefaultServerErrorCodes, true
	}
	return cd
}

// view is the series the condition reads.
func (cd *errorsCond) view() view {
	if cd.serverOnly {
		return viewServer
	}
	return viewAll
}

// grows says whether the window grows to find enough calls: a ratio
// needs minCalls; a rate is per second over any window.
func (cd *errorsCond) grows() bool { return cd.rate == 0 && cd.window < maxWindow }

func parseErrors(cc *Condition, cm condCommon, _ *Config) (condition, error) {
	w, err := recentWindow(cm.window, defaultErrorWindow)
	if err != nil {
		return nil, err
	}
	for _, code := range cc.Codes {
		if !codeNames[code] || code == "OK" {
			return nil, fmt.Errorf("codes: %q is not a failing gRPC code name (e.g. Internal)", code)
		}
	}
	cd := newErrorRatio(w, cc.Codes, 0, cm.minCalls)
	switch {
	case cc.Ratio != "" && cc.Rate == "":
		v, err := parseRatio(cc.Ratio)
		if err != nil || v <= 0 || v >= 1 {
			return nil, fmt.Errorf("ratio: %q, want a fraction between 0 and 1 like 5%%", cc.Ratio)
		}
		cd.ratio = v
	case cc.Rate != "" && cc.Ratio == "":
		v, err := parseRatio(cc.Rate)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("rate: %q, want failed calls per second", cc.Rate)
		}
		cd.rate = v
	default:
		return nil, fmt.Errorf("set one of ratio and rate")
	}
	return cd, nil
}

func (cd *errorsCond) kind() string { return KindErrors }

// models adds the models with any call in the (grown) window: errors
// count every call, not only the successful ones.
func (cd *errorsCond) models(f *frame, sel selector, seen map[string]bool) {
	w := cd.window
	if cd.grows() {
		w = maxWindow
	}
	for m := range f.windowOf(sel, w, cd.view()) {
		seen[m] = true
	}
}

func (cd *errorsCond) eval(f *frame, r *Rule, _ int, model string) outcome {
	w := cd.window
	for {
		rs, ok := f.windowOf(r.sel, w, cd.view())[model]
		n := rs.Stats[monitor.ComponentTotal].Count
		if cd.grows() && n < cd.minCalls && w < maxWindow {
			w = min(2*w, maxWindow)
			continue
		}
		if !ok || n == 0 {
			// None, or only samples of streams still open.
			if cd.grows() {
				return outcome{holds: no, note: "no traffic in the last " + w.String(), text: "no traffic"}
			}
			return outcome{note: "no calls"}
		}
		o := cd.outcome(rs, w)
		if w != cd.window {
			o.note += " over " + w.String()
		}
		return o
	}
}

// outcome compares a failure ratio (its Wilson lower bound at the
// monitor's confidence) or rate with the condition's.
func (cd *errorsCond) outcome(rs monitor.RecentStats, w time.Duration) outcome {
	n := rs.Stats[monitor.ComponentTotal].Count
	failed := rs.FailedOf(cd.codes)
	o := outcome{calls: n, op: ">", measure: "failed calls", bound: "its bound"}
	if cd.rate > 0 {
		o.unit, o.threshold, o.measure = "1/s", cd.rate, "failures"
		o.value = float64(failed) / w.Seconds()
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

// prom is the failed rate, or the failed ratio guarded, as in infergate,
// by a minimum number of calls.
func (cd *errorsCond) prom(r *Rule, _ *Config) []promExpr {
	sel := promSelector(r.sel)
	window := promDuration(max(cd.window, minPromWindow))
	codes := fmt.Sprintf(`code=~"%s"`, strings.Join(cd.codes, "|"))
	// Neither the grown window nor the client's deadlines (a
	// DeadlineExceeded's class is not a label of the counter) are in
	// PromQL: the exported rule reads a fixed window and every call.
	failed := fmt.Sprintf("sum by (model) (rate(infergate_requests_total{%s,%s}[%s]))", sel, codes, window)
	if cd.rate > 0 {
		return []promExpr{{expr: fmt.Sprintf("%s > %s", failed, num(cd.rate)), threshold: num(cd.rate) + "/s",
			said: said{measure: "failures", unit: "1/s", op: ">", bound: "its bound"}}}
	}
	all := fmt.Sprintf("sum by (model) (rate(infergate_requests_total{%s}[%s]))", sel, window)
	// As in infergate, too few calls decide nothing.
	return []promExpr{{expr: fmt.Sprintf("(%s / %s > %s) and (%s * %d >= %d)", failed, all, num(cd.ratio), all,
		int(max(cd.window, minPromWindow).Seconds()), cd.minCalls), threshold: num(100*cd.ratio) + "%",
		said: said{measure: "failed calls", unit: "ratio", op: ">", bound: "its bound"}}}
}
