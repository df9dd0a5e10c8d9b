package alert

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor"
)

// streamMetrics are the stream quantities a threshold condition can name
// as its metric: measured per request inside ModelStreamInfer
// streams, where a stream's own length says little.
var streamMetrics = map[string]*struct {
	q monitor.StreamQuantity
	// noun names what the quantity counts, in the evidence.
	noun string
}{
	"ttfr":                  {monitor.StreamFirstResponse, "requests"},
	"response_gap":          {monitor.StreamResponseGap, "responses"},
	"responses_per_request": {monitor.StreamResponses, "requests"},
}

// streamMetricList is "response_gap | responses_per_request | ttfr".
func streamMetricList() string {
	var names []string
	for n := range streamMetrics {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, " | ")
}

// streamCond is a threshold condition on a stream quantity: a quantile
// (through its lower confidence bound when "above") of the successful
// responses over window, e.g. metric: ttfr, quantile: p99, value: 500ms.
// It reads the proxy's own stream summaries, which a fleet's Prometheus
// cannot sum across replicas, so it is not exported.
type streamCond struct {
	metric string
	window time.Duration
	q      monitor.StreamQuantity
	check  quantileCheck
}

// parseStreamQuantile compiles a threshold condition whose metric is a
// stream quantity; w is its checked window.
func parseStreamQuantile(cc *Condition, cm condCommon, w time.Duration) (condition, error) {
	sm := streamMetrics[cc.Metric]
	if cc.Quantile == "" {
		return nil, fmt.Errorf("quantile: missing (metric: %s reads a quantile)", cc.Metric)
	}
	q, err := parseQuantile(cc.Quantile)
	if err != nil {
		return nil, err
	}
	cd := &streamCond{metric: cc.Metric, window: w, q: sm.q, check: quantileCheck{op: cm.op, quantile: cc.Quantile, q: q,
		value: sm.q.Value, unit: "s", noun: sm.noun, measure: cc.Metric + " " + cc.Quantile}}
	if sm.q == monitor.StreamResponses {
		v, err := strconv.ParseFloat(cc.Value, 64)
		if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("value: %q, want a number of responses like 20", cc.Value)
		}
		cd.check.threshold, cd.check.unit = v, "count"
		return cd, nil
	}
	d, err := time.ParseDuration(cc.Value)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("value: %q, want a duration like 500ms (metric: %s has no slo)", cc.Value, cc.Metric)
	}
	cd.check.threshold = d.Seconds()
	return cd, nil
}

func (cd *streamCond) kind() string { return KindThreshold }

// models adds the models whose streams answered in the window.
func (cd *streamCond) models(f *frame, sel selector, seen map[string]bool) {
	for m, rs := range f.window(sel, cd.window, true) {
		if st, _ := rs.StreamOf(cd.q); st.Count > 0 {
			seen[m] = true
		}
	}
}

func (cd *streamCond) eval(f *frame, r *Rule, _ int, model string) outcome {
	rs, ok := f.window(r.sel, cd.window, true)[model]
	st, b := rs.StreamOf(cd.q)
	if !ok || st.Count == 0 {
		return outcome{unit: cd.check.unit, threshold: cd.check.threshold, note: "no stream " + cd.check.noun}
	}
	o := cd.check.outcome(st, b)
	o.note = cd.metric + " " + o.note
	return o
}
