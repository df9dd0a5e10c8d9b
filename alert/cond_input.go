package alert

import (
	"fmt"
	"math"
)

// KindInputSize compares a model's recent request size (bytes, or rows)
// p90 with its learned usual p90: the inputs themselves, whatever the
// latency does.
const KindInputSize = "input_size"

// Metrics of an input_size condition.
const (
	InputMetricBytes = "request_bytes"
	InputMetricRows  = "rows"
)

// inputSizeCond is a compiled input_size condition. It reads the
// correlator's view of the inputs (correlate.InputState): the recent
// window is the correlator's (5s by default), and the test is its
// binomial one on powers of two, so the claim is "at least the next power
// of two at or above factor": the default factor 2 fires on inputs that
// grew ×4 and never on a steady mix of sizes.
type inputSizeCond struct {
	rows     bool
	factor   float64
	minCalls uint64
}

func parseInputSize(cc *Condition, cm condCommon, _ *Config) (condition, error) {
	cd := &inputSizeCond{factor: 2, minCalls: cm.minCalls}
	switch cc.Metric {
	case "", InputMetricBytes:
	case InputMetricRows:
		cd.rows = true
	default:
		return nil, fmt.Errorf("metric: %q, want %s or %s", cc.Metric, InputMetricBytes, InputMetricRows)
	}
	if cc.Quantile != "" && cc.Quantile != "p90" {
		return nil, fmt.Errorf("quantile: %q, input_size conditions compare the p90", cc.Quantile)
	}
	if cm.window != 0 {
		return nil, fmt.Errorf("window: input_size conditions read the correlator's recent window; leave it out (use for: to hold)")
	}
	if cm.op != ">" {
		return nil, fmt.Errorf("op: input_size conditions are 'above'")
	}
	if cc.Factor != 0 {
		if !(cc.Factor > 1) || math.IsInf(cc.Factor, 0) {
			return nil, fmt.Errorf("factor: %v, want a finite number above 1", cc.Factor)
		}
		cd.factor = cc.Factor
	}
	return cd, nil
}

func (cd *inputSizeCond) kind() string { return KindInputSize }

// models adds the models with calls in the correlator's window.
func (cd *inputSizeCond) models(f *frame, sel selector, seen map[string]bool) {
	f.addModels(sel, defaultLatencyWindow, true, seen)
}

func (cd *inputSizeCond) eval(f *frame, _ *Rule, _ int, model string) outcome {
	ms, ok := f.models[model]
	if !ok {
		return outcome{note: "no correlation for the model"}
	}
	in, d, what := ms.Inputs, ms.Inputs.Bytes, "request bytes"
	if cd.rows {
		d, what = ms.Inputs.Rows, "rows"
	}
	o := outcome{calls: d.Calls, value: float64(d.P90), threshold: cd.factor * float64(d.BaselineP90), unit: "count",
		op: ">", measure: what + " p90", bound: "its bound", boundNote: fmt.Sprintf("%g× its usual p90 %d", cd.factor, d.BaselineP90)}
	above, decided := d.Above(cd.factor)
	switch {
	case !in.Known:
		o.note = "input baseline still learning"
	case !decided || d.Calls < cd.minCalls:
		o.note = "too few calls to bound the p90"
	default:
		o.holds = triOf(above)
		o.note = fmt.Sprintf("%s p90 ≤ %d vs baseline p90 ≤ %d (powers of two)", what, d.P90, d.BaselineP90)
	}
	return o
}
