package alert

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
)

// Rule is a compiled, validated rule.
type Rule struct {
	Name          string
	Severity      string
	For           time.Duration
	KeepFiringFor time.Duration
	Labels        map[string]string
	Action        string
	Escalate      *EscalateConfig
	// PerGPU is true for rules whose conditions all read a GPU: their
	// alerts are per device (label gpu) instead of per model.
	PerGPU bool
	// Config is the rule as written, for the API and the export.
	Config RuleConfig

	compound string // "", "all" or "any"
	conds    []*cond
	sel      selector
	ann      map[string]*template.Template
}

// selector is a compiled Selector.
type selector struct {
	model, version, method, upstream string
	// inference restricts to the inference methods when method is "".
	inference bool
}

var inferenceMethods = []string{"ModelInfer", "ModelStreamInfer", "Predict", "Classify", "Regress", "MultiInference"}

func glob(pattern, s string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	ok, _ := path.Match(pattern, s)
	return ok
}

// matches reports whether a series belongs to the selection.
func (s selector) matches(k monitor.SeriesKey) bool {
	if k == monitor.OverflowKey || k.Model == "" {
		return false
	}
	if !glob(s.model, k.Model) || !glob(s.version, k.Version) || !glob(s.upstream, k.Upstream) {
		return false
	}
	m := k.Method
	if s.method != "" {
		return glob(s.method, m)
	}
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return slices.Contains(inferenceMethods, m)
}

func (s selector) key() string {
	return s.model + "\x00" + s.version + "\x00" + s.method + "\x00" + s.upstream
}

// cond is a compiled Condition.
type cond struct {
	kind     string
	quantile string
	q        int // index in monitor.Quantiles
	bq       int // index in baseline quantiles
	metric   string
	window   time.Duration
	op       string
	value    float64 // seconds, per second, ratio or GPU units
	useSLO   bool
	rise     baseline.Rise
	slope    float64 // seconds per second
	codes    []string
	ratio    float64
	rate     float64
	field    string
	hints    []string
	minCalls uint64
}

var quantileIndex = map[string]int{"p50": 0, "p90": 1, "p99": 2, "p999": 3}

// Defaults of conditions.
const (
	defaultLatencyWindow = 10 * time.Second
	defaultErrorWindow   = 5 * time.Second
	defaultTrendWindow   = 5 * time.Minute
	maxTrendWindow       = time.Hour
	defaultErrorMinCalls = 20
	// trendSampleWindow is the window of each quantile a trend regresses.
	trendSampleWindow = 10 * time.Second
)

func compileRule(rc *RuleConfig, c *Config) (*Rule, error) {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if rc.Name == "" {
		bad("name: missing")
	}
	r := &Rule{Name: rc.Name, Severity: rc.Severity, For: rc.For, KeepFiringFor: rc.KeepFiringFor,
		Labels: rc.Labels, Action: rc.Action, Escalate: rc.Escalate, Config: *rc}
	switch rc.Severity {
	case SeverityWarning, SeverityCritical:
	case "":
		r.Severity = SeverityWarning
		r.Config.Severity = SeverityWarning
	default:
		bad("severity: %q, want warning or critical", rc.Severity)
	}
	if rc.For < 0 || rc.KeepFiringFor < 0 {
		bad("for and keep_firing_for must not be negative")
	}
	for k := range rc.Labels {
		if k == "alertname" || k == "severity" || k == "model" || k == "gpu" {
			bad("labels.%s: set by the rule itself", k)
		}
	}
	if e := rc.Escalate; e != nil {
		if e.After <= 0 {
			bad("escalate.after: must be positive")
		}
		if e.Severity == "" {
			e.Severity = SeverityCritical
		} else if e.Severity != SeverityWarning && e.Severity != SeverityCritical {
			bad("escalate.severity: %q, want warning or critical", e.Severity)
		}
	}
	for _, g := range []string{rc.Select.Model, rc.Select.Version, rc.Select.Method, rc.Select.Upstream} {
		if _, err := path.Match(g, ""); err != nil {
			bad("select: bad glob %q", g)
		}
	}
	r.sel = selector{model: rc.Select.Model, version: rc.Select.Version, method: rc.Select.Method, upstream: rc.Select.Upstream}
	var err error
	if r.ann, err = parseTemplates(rc.Annotations); err != nil {
		bad("%v", err)
	}
	kind := rc.Kind
	if kind == "" && (rc.All != nil || rc.Any != nil) {
		kind = KindCompound
	}
	switch {
	case kind == KindCompound:
		if (rc.All == nil) == (rc.Any == nil) {
			bad("compound: set exactly one of all and any")
		}
		list, name := rc.All, "all"
		if rc.Any != nil {
			list, name = rc.Any, "any"
		}
		r.compound = name
		for i := range list {
			if list[i].Kind == KindCompound {
				bad("%s[%d].kind: compound conditions do not nest", name, i)
				continue
			}
			cd, err := compileCond(&list[i], c)
			if err != nil {
				bad("%s[%d]: %v", name, i, err)
				continue
			}
			r.conds = append(r.conds, cd)
		}
		if len(list) == 0 {
			bad("%s: no conditions", name)
		}
	case rc.All != nil || rc.Any != nil:
		bad("all/any: only for kind compound")
	default:
		cd, err := compileCond(&rc.Condition, c)
		if err != nil {
			bad("%v", err)
		} else {
			r.conds = []*cond{cd}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	r.PerGPU = true
	for _, cd := range r.conds {
		if cd.kind != KindGPU {
			r.PerGPU = false
		}
	}
	if r.Action != "" && r.PerGPU {
		return nil, fmt.Errorf("action: a per-GPU rule has no model to act on")
	}
	return r, nil
}

func compileCond(cc *Condition, c *Config) (*cond, error) {
	cd := &cond{kind: cc.Kind, window: cc.Window, op: cc.Op, minCalls: cc.MinCalls, quantile: cc.Quantile}
	if cd.op == "" {
		cd.op = ">"
	}
	switch cd.op {
	case ">", ">=", "<", "<=":
	default:
		return nil, fmt.Errorf("op: %q, want >, >=, < or <=", cc.Op)
	}
	if cc.Window < 0 {
		return nil, fmt.Errorf("window: must not be negative")
	}
	quant := func(allowed ...string) error {
		q, ok := quantileIndex[cc.Quantile]
		if !ok || (allowed != nil && !slices.Contains(allowed, cc.Quantile)) {
			want := "p50, p90, p99 or p999"
			if allowed != nil {
				want = strings.Join(allowed, ", ")
			}
			return fmt.Errorf("quantile: %q, want %s", cc.Quantile, want)
		}
		cd.q = q
		return nil
	}
	latencyWindow := func(def time.Duration) error {
		if cd.window == 0 {
			cd.window = def
		}
		if cd.window > maxWindow || cd.window < time.Second {
			return fmt.Errorf("window: %v, want 1s to %v (for longer, add for:)", cd.window, maxWindow)
		}
		return nil
	}
	switch cc.Kind {
	case KindThreshold:
		if err := latencyWindow(defaultLatencyWindow); err != nil {
			return nil, err
		}
		switch {
		case cc.Metric == "" && cc.Quantile != "":
			if err := quant(); err != nil {
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
				break
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
			cd.metric = cc.Metric
			v, err := parseRatio(cc.Value)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("value: %v", err)
			}
			cd.value = v
			if cd.metric == "error_ratio" {
				cd.codes = DefaultServerErrorCodes
				cd.kind = KindErrors
				cd.ratio = v
				if cd.minCalls == 0 {
					cd.minCalls = defaultErrorMinCalls
				}
			}
		default:
			return nil, fmt.Errorf("quantile: missing (or metric: rate | error_ratio)")
		}
	case KindBaseline:
		// No quantile: any of p50, p90 and p99, the notion of "latency
		// up" the cause hints use.
		cd.bq = -1
		if cc.Quantile != "" {
			if err := quant("p50", "p90", "p99"); err != nil {
				return nil, err
			}
			cd.bq = cd.q
		}
		if err := latencyWindow(defaultLatencyWindow); err != nil {
			return nil, err
		}
		if cc.AbovePercent < 0 {
			return nil, fmt.Errorf("above_percent: must not be negative")
		}
		cd.rise = baseline.DefaultRise
		if cc.AbovePercent > 0 {
			cd.rise = baseline.Rise{Factor: 1 + cc.AbovePercent/100, Band: -1, Min: time.Millisecond}
		}
		if cd.op != ">" {
			return nil, fmt.Errorf("op: baseline conditions are 'above'")
		}
	case KindTrend:
		if err := quant(); err != nil {
			return nil, err
		}
		if cd.window == 0 {
			cd.window = defaultTrendWindow
		}
		if cd.window < time.Minute || cd.window > maxTrendWindow {
			return nil, fmt.Errorf("window: %v, want 1m to %v", cd.window, maxTrendWindow)
		}
		s, err := parseSlope(cc.Slope)
		if err != nil {
			return nil, fmt.Errorf("slope: %v", err)
		}
		cd.slope = s
	case KindErrors:
		if err := latencyWindow(defaultErrorWindow); err != nil {
			return nil, err
		}
		cd.codes = cc.Codes
		if cd.codes == nil {
			cd.codes = DefaultServerErrorCodes
		}
		for _, code := range cd.codes {
			if !codeNames[code] || code == "OK" {
				return nil, fmt.Errorf("codes: %q is not a failing gRPC code name (e.g. Internal)", code)
			}
		}
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
		if cd.minCalls == 0 {
			cd.minCalls = defaultErrorMinCalls
		}
	case KindGPU:
		switch cc.Field {
		case "utilization", "memory_ratio", "temperature", "throttled":
		default:
			return nil, fmt.Errorf("field: %q, want utilization, memory_ratio, temperature or throttled", cc.Field)
		}
		cd.field = cc.Field
		if cc.Field == "throttled" {
			cd.value = 0.5
			break
		}
		v, err := parseRatio(cc.Value)
		if err != nil {
			return nil, fmt.Errorf("value: %v", err)
		}
		cd.value = v
	case KindHint:
		if len(cc.Hints) == 0 {
			return nil, fmt.Errorf("hints: missing")
		}
		for _, h := range cc.Hints {
			if !slices.Contains(correlate.Hints, h) {
				return nil, fmt.Errorf("hints: %q, want one of %s", h, strings.Join(correlate.Hints, ", "))
			}
		}
		cd.hints = cc.Hints
	case "":
		return nil, fmt.Errorf("kind: missing (threshold, baseline, trend, errors, gpu, hint or compound)")
	default:
		return nil, fmt.Errorf("kind: %q, want threshold, baseline, trend, errors, gpu, hint or compound", cc.Kind)
	}
	return cd, nil
}

// compare applies op.
func compare(op string, v, t float64) bool {
	switch op {
	case ">":
		return v > t
	case ">=":
		return v >= t
	case "<":
		return v < t
	case "<=":
		return v <= t
	}
	return false
}

// seconds formats a duration in seconds for evidence.
func fmtSeconds(s float64) string {
	if math.IsNaN(s) {
		return "NaN"
	}
	return time.Duration(math.Round(s * 1e9)).Round(10 * time.Microsecond).String()
}
