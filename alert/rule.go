package alert

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/methods"
)

// ActionFallback is the action a rule may name: while the alert fires,
// its model is served by its route's fallback (the proxy's Actuator).
const ActionFallback = "fallback"

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
	conds    []condition
	sel      selector
	ann      map[string]*annotation
}

// selector is a compiled Selector.
type selector struct {
	model, version, method, upstream string
	// inference restricts to the inference methods when method is "".
	inference bool
}

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
	return methods.IsInferenceName(methods.Short(m))
}

func (s selector) key() string {
	return s.model + "\x00" + s.version + "\x00" + s.method + "\x00" + s.upstream
}

// maxWindow is the longest window a quantile or error condition reads:
// monitor keeps one minute of one-second slices.
const maxWindow = time.Minute

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
	switch rc.Action {
	case "", ActionFallback:
	default:
		bad("action: %q, want %s (the only action the proxy carries out) or none", rc.Action, ActionFallback)
	}
	if r.ann, err = parseTemplates(rc.Annotations); err != nil {
		bad("%v", err)
	}
	r.compound, r.conds = compileConditions(rc, c, bad)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	r.PerGPU = true
	for _, cd := range r.conds {
		if _, ok := cd.(deviceCondition); !ok {
			r.PerGPU = false
		}
	}
	if r.Action != "" && r.PerGPU {
		return nil, fmt.Errorf("action: a per-GPU rule has no model to act on")
	}
	return r, nil
}
