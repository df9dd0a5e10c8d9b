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
type errorsCond struct {
	window   time.Duration
	codes    []string
	ratio    float64
	rate     float64 // when > 0, instead of ratio
	minCalls uint64
}

// newErrorRatio is an errors condition on the ratio; minCalls 0 means
// the default.
func newErrorRatio(window time.Duration, codes []string, ratio float64, minCalls uint64) *errorsCond {
	if minCalls == 0 {
		minCalls = defaultErrorMinCalls
	}
	return &errorsCond{window: window, codes: codes, ratio: ratio, minCalls: minCalls}
}

func parseErrors(cc *Condition, cm condCommon, _ *Config) (condition, error) {
	w, err := recentWindow(cm.window, defaultErrorWindow)
	if err != nil {
		return nil, err
	}
	codes := cc.Codes
	if codes == nil {
		codes = DefaultServerErrorCodes
	}
	for _, code := range codes {
		if !codeNames[code] || code == "OK" {
			return nil, fmt.Errorf("codes: %q is not a failing gRPC code name (e.g. Internal)", code)
		}
	}
	cd := newErrorRatio(w, codes, 0, cm.minCalls)
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

// models adds the models with any call: errors count every call, not
// only the successful ones.
func (cd *errorsCond) models(f *frame, sel selector, seen map[string]bool) {
	f.addModels(sel, cd.window, false, seen)
}

func (cd *errorsCond) eval(f *frame, r *Rule, _ int, model string) outcome {
	rs, ok := f.window(r.sel, cd.window, false)[model]
	if !ok || rs.Stats[monitor.ComponentTotal].Count == 0 {
		// None, or only samples of streams still open.
		return outcome{note: "no calls"}
	}
	return cd.outcome(rs)
}

// outcome compares a failure ratio (its Wilson lower bound at the
// monitor's confidence) or rate with the condition's.
func (cd *errorsCond) outcome(rs monitor.RecentStats) outcome {
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

// prom is the failed rate, or the failed ratio guarded, as in infergate,
// by a minimum number of calls.
func (cd *errorsCond) prom(r *Rule, _ *Config) []promExpr {
	sel := promSelector(r.sel)
	window := promDuration(max(cd.window, minPromWindow))
	codes := fmt.Sprintf(`code=~"%s"`, strings.Join(cd.codes, "|"))
	failed := fmt.Sprintf("sum by (model) (rate(infergate_requests_total{%s,%s}[%s]))", sel, codes, window)
	if cd.rate > 0 {
		return []promExpr{{expr: fmt.Sprintf("%s > %s", failed, num(cd.rate)), threshold: num(cd.rate) + "/s"}}
	}
	all := fmt.Sprintf("sum by (model) (rate(infergate_requests_total{%s}[%s]))", sel, window)
	// As in infergate, too few calls decide nothing.
	return []promExpr{{expr: fmt.Sprintf("(%s / %s > %s) and (%s * %d >= %d)", failed, all, num(cd.ratio), all,
		int(max(cd.window, minPromWindow).Seconds()), cd.minCalls), threshold: num(100*cd.ratio) + "%"}}
}
