package alert

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor/gpu"
)

// condition is one compiled condition of a rule. Each kind is one type in
// its own file (cond_<kind>.go) that parses and checks its fields,
// evaluates and, where Prometheus can run it too, exports itself; the
// kind's line in conditionKinds registers it. Conditions are immutable
// once compiled: what a kind remembers between evaluations (a trend's
// samples) lives in the frame's stores, not in the condition.
type condition interface {
	// kind is the kind as written in YAML (and shown in the evidence).
	kind() string
	// models adds to seen the models f has data for that the condition
	// can judge; kinds that read no recent window (gpu, hint) add none.
	models(f *frame, sel selector, seen map[string]bool)
	// eval judges the condition, the i-th of rule r, for model.
	eval(f *frame, r *Rule, i int, model string) outcome
}

// deviceCondition is a condition that can judge a GPU by itself: a rule
// whose conditions all are is evaluated per GPU instead of per model.
type deviceCondition interface {
	condition
	device(d gpu.Device) outcome
}

// promCondition is a condition a fleet's Prometheus can evaluate too
// (ExportPrometheus): one promExpr per alerting expression.
type promCondition interface {
	condition
	prom(r *Rule, c *Config) []promExpr
}

// promExpr is one exported alerting expression: the labels it adds (nil
// for none) and its threshold as a person reads it ("250ms", "1%"), which
// the annotations' .Threshold becomes (Prometheus's $value is the
// measured value, not the threshold).
type promExpr struct {
	expr      string
	labels    map[string]string
	threshold string
	said      said
}

// said is how an exported expression's summary names its value and
// bound (summary.go): "p99 312ms, over its SLO 250ms".
type said struct {
	measure, unit, op, bound string
}

// parseFunc compiles one kind's fields of cc; common holds what every
// kind shares (op, window, min_calls, quantile as written), already
// checked.
type parseFunc func(cc *Condition, common condCommon, c *Config) (condition, error)

// conditionKinds are the condition kinds, in the order error messages
// list them. To add a kind, write cond_<kind>.go and add its line here.
// Compound (all / any) is not a condition but a rule of several:
// cond_compound.go.
var conditionKinds = []struct {
	name  string
	parse parseFunc
}{
	{KindThreshold, parseThreshold},
	{KindBaseline, parseBaseline},
	{KindTrend, parseTrend},
	{KindErrors, parseErrors},
	{KindGPU, parseGPU},
	{KindHint, parseHint},
	{KindInputSize, parseInputSize},
	{KindVersionRegression, parseVersionRegression},
	{KindAnomaly, parseAnomaly},
}

// kindList is "threshold, baseline, ..., hint or compound".
func kindList() string {
	var names []string
	for _, k := range conditionKinds {
		names = append(names, k.name)
	}
	return strings.Join(names, ", ") + " or " + KindCompound
}

// condCommon is what every kind shares, checked before the kind's own
// fields.
type condCommon struct {
	op       string
	window   time.Duration
	minCalls uint64
	quantile string
}

// compileCond checks the fields every kind shares and hands the rest to
// the kind's parser.
func compileCond(cc *Condition, c *Config) (condition, error) {
	cm := condCommon{window: cc.Window, op: cc.Op, minCalls: cc.MinCalls, quantile: cc.Quantile}
	if cm.op == "" {
		cm.op = ">"
	}
	switch cm.op {
	case ">", ">=", "<", "<=":
	default:
		return nil, fmt.Errorf("op: %q, want >, >=, < or <=", cc.Op)
	}
	if cc.Window < 0 {
		return nil, fmt.Errorf("window: must not be negative")
	}
	if cc.Kind == "" {
		return nil, fmt.Errorf("kind: missing (%s)", kindList())
	}
	for _, k := range conditionKinds {
		if k.name == cc.Kind {
			return k.parse(cc, cm, c)
		}
	}
	return nil, fmt.Errorf("kind: %q, want %s", cc.Kind, kindList())
}

var quantileIndex = map[string]int{"p50": 0, "p90": 1, "p99": 2, "p999": 3}

// parseQuantile returns the index of a quantile in monitor.Quantiles,
// restricted to allowed when given.
func parseQuantile(quantile string, allowed ...string) (int, error) {
	q, ok := quantileIndex[quantile]
	if !ok || (allowed != nil && !slices.Contains(allowed, quantile)) {
		want := "p50, p90, p99 or p999"
		if allowed != nil {
			want = strings.Join(allowed, ", ")
		}
		return 0, fmt.Errorf("quantile: %q, want %s", quantile, want)
	}
	return q, nil
}

// recentWindow defaults and checks the window of a condition that reads
// monitor's recent slices.
func recentWindow(w, def time.Duration) (time.Duration, error) {
	if w == 0 {
		w = def
	}
	if w > maxWindow || w < time.Second {
		return 0, fmt.Errorf("window: %v, want 1s to %v (for longer, add for:)", w, maxWindow)
	}
	return w, nil
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

func triOf(b bool) tri {
	if b {
		return yes
	}
	return no
}

// outcome is one condition's verdict for one subject, with its evidence.
type outcome struct {
	holds     tri
	value     float64 // what was measured (seconds, ratio, ...)
	threshold float64
	unit      string // "s", "ratio", "1/s", "s/min", "°C", "count", "" (a plain number)
	calls     uint64
	note      string
	// The words of the summary (summary.go): op is the condition's
	// comparison (">" when empty); measure names the value ("p99",
	// "failed calls"), bound the threshold ("its bound", "its baseline
	// bound"), boundNote what the threshold is made of ("2× its usual
	// 4096"); text, when set, is the value in words for kinds without a
	// number (a cause hint, GPU throttling, no traffic).
	op, measure, bound, boundNote, text string
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
	case "°C":
		return fmt.Sprintf("%.0f°C", v)
	case "count":
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
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

// fmtSeconds formats a duration in seconds for evidence.
func fmtSeconds(s float64) string {
	if math.IsNaN(s) {
		return "NaN"
	}
	return time.Duration(math.Round(s * 1e9)).Round(10 * time.Microsecond).String()
}
