package alert

import (
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// Config is the alerting section of infergate's YAML (the rules: file or
// the rules: section of --config). Zero values mean the documented
// defaults; Validate fills them in.
type Config struct {
	// EvaluationInterval is how often rules are evaluated; 0 means 1s.
	EvaluationInterval time.Duration `yaml:"evaluation_interval"`
	// SLO maps model globs to latency objectives, e.g. resnet50: {p99:
	// 50ms}; the first matching glob in file order wins. A model's SLO
	// is the absolute anchor of "latency up" and the value of threshold
	// rules that say value: slo.
	SLO []SLOConfig `yaml:"slo"`
	// Baseline configures the seasonal baseline.
	Baseline BaselineConfig `yaml:"baseline"`
	// Rules replace the built-in default rules when present.
	Rules []RuleConfig `yaml:"rules"`
	// Anomaly adds the built-in ModelAnomaly rule to the default rules.
	// Off by default: a model's detector and its features hold about
	// 60 KiB of the process's memory (1,000 models: 60 MiB), more than
	// the 100 MiB a thousand busy models fit in without it. A rule of
	// kind anomaly turns the detectors on as well.
	Anomaly bool `yaml:"anomaly"`
	// Route says where notifications go; nil means every alert to the
	// log receiver.
	Route *RouteConfig `yaml:"route"`
	// Receivers are the notification targets routes name.
	Receivers []notify.ReceiverConfig `yaml:"receivers"`
	// Inhibit rules mute alerts while another alert fires.
	Inhibit []InhibitConfig `yaml:"inhibit_rules"`
	// Schedules are named weekly time windows routes can depend on
	// (business hours vs off-hours on-call).
	Schedules []ScheduleConfig `yaml:"schedules"`
	// StateFile keeps alert state, silences and what was sent, so a
	// restart neither forgets nor re-pages; "" means in memory only.
	StateFile string `yaml:"state_file"`
	// ExternalURL is the link notifications carry back to infergate.
	ExternalURL string `yaml:"external_url"`

	rules     []*Rule
	schedules map[string]*schedule
	builtin   bool
}

// SLOConfig is one model glob's objectives.
type SLOConfig struct {
	Model string        `yaml:"model"`
	P50   time.Duration `yaml:"p50"`
	P90   time.Duration `yaml:"p90"`
	P99   time.Duration `yaml:"p99"`
}

// BaselineConfig configures the seasonal baseline store.
type BaselineConfig struct {
	// File persists the learned history; "" means in memory only.
	File string `yaml:"file"`
	// TimeZone of the hours of the week (IANA name); "" means UTC.
	TimeZone string `yaml:"time_zone"`
	// Holidays are dates (2006-01-02) that count as Sundays.
	Holidays []string `yaml:"holidays"`
	// Weeks of history per hour of the week; 0 means 4.
	Weeks int `yaml:"weeks"`
	// TimeScale runs the seasonal clock this many times faster than real
	// time (replaying compressed days in the bench); 0 means 1.
	TimeScale float64 `yaml:"time_scale"`
	// Prometheus, when set, is a Prometheus base URL whose history of
	// infergate_request_duration_seconds warms the baseline at start.
	Prometheus string `yaml:"prometheus"`
	// Learn is how long a model's calm calls are learned before its
	// baseline counts (and the baseline rules may fire): a start's first
	// seconds are not what is normal for a model. 0 means 30s.
	Learn time.Duration `yaml:"learn"`
}

// RouteConfig is a node of the routing tree, like Alertmanager's: the
// first child route that matches wins (unless continue), else this node's
// receiver.
type RouteConfig struct {
	Receiver string            `yaml:"receiver"`
	Match    map[string]string `yaml:"match"` // label: glob
	// Schedule, when set, makes the route match only while the named
	// schedule is active; "!name" only while it is not.
	Schedule       string         `yaml:"schedule"`
	GroupBy        []string       `yaml:"group_by"`
	GroupWait      time.Duration  `yaml:"group_wait"`
	GroupInterval  time.Duration  `yaml:"group_interval"`
	RepeatInterval time.Duration  `yaml:"repeat_interval"`
	Continue       bool           `yaml:"continue"`
	Routes         []*RouteConfig `yaml:"routes"`
}

// Defaults of the root route.
const (
	DefaultGroupWait      = 2 * time.Second
	DefaultGroupInterval  = 30 * time.Second
	DefaultRepeatInterval = 5 * time.Minute
	// MinNotifyInterval is the least group_interval and repeat_interval.
	MinNotifyInterval = time.Second
)

// InhibitConfig mutes target alerts while a source alert fires and the
// labels in Equal are the same on both.
type InhibitConfig struct {
	SourceMatch map[string]string `yaml:"source_match"`
	TargetMatch map[string]string `yaml:"target_match"`
	Equal       []string          `yaml:"equal"`
}

// ScheduleConfig is a weekly window: on the named weekdays between Start
// and End (HH:MM, End exclusive) in TimeZone.
type ScheduleConfig struct {
	Name     string   `yaml:"name"`
	TimeZone string   `yaml:"time_zone"`
	Weekdays []string `yaml:"weekdays"`
	Start    string   `yaml:"start"`
	End      string   `yaml:"end"`
}

// RuleConfig is one rule as written in YAML.
type RuleConfig struct {
	Name string `yaml:"name" json:"name,omitempty"`
	// Condition holds kind and the kind's fields, inline.
	Condition `yaml:",inline"`
	// All and Any make a compound rule (kind: compound): every (any) of
	// the conditions must hold.
	All []Condition `yaml:"all" json:"all,omitempty"`
	Any []Condition `yaml:"any" json:"any,omitempty"`
	// Select picks the series by glob (model, version, method,
	// upstream); empty fields match all. Latency conditions default to
	// the inference methods.
	Select Selector `yaml:"select" json:"select,omitempty"`
	// Severity is warning or critical.
	Severity string `yaml:"severity" json:"severity,omitempty"`
	// For is how long the condition must hold before the alert fires.
	For time.Duration `yaml:"for" json:"for,omitempty"`
	// KeepFiringFor keeps a firing alert firing this long after its
	// condition stops holding (no flapping resolve).
	KeepFiringFor time.Duration     `yaml:"keep_firing_for" json:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels" json:"labels,omitempty"`
	// Annotations are text/template strings over .Labels, .Value,
	// .Threshold and .Evidence.
	Annotations map[string]string `yaml:"annotations" json:"annotations,omitempty"`
	// Action names what the proxy should do while the alert fires (e.g.
	// fallback); "" means nothing.
	Action string `yaml:"action" json:"action,omitempty"`
	// Escalate raises an alert unresolved for After.
	Escalate *EscalateConfig `yaml:"escalate" json:"escalate,omitempty"`
}

// EscalateConfig turns an alert that stays unresolved into a more urgent
// one: after After, its severity becomes Severity (default critical) and
// its label escalated="true" lets a route send it to the next receiver.
type EscalateConfig struct {
	After    time.Duration `yaml:"after" json:"after,omitempty"`
	Severity string        `yaml:"severity" json:"severity,omitempty"`
}

// Selector picks series by glob.
type Selector struct {
	Model    string `yaml:"model" json:"model,omitempty"`
	Version  string `yaml:"version" json:"version,omitempty"`
	Method   string `yaml:"method" json:"method,omitempty"`
	Upstream string `yaml:"upstream" json:"upstream,omitempty"`
}

// Condition is one condition; Kind says which fields apply.
type Condition struct {
	// Kind is threshold, baseline, trend, errors, gpu, hint, input_size,
	// version_regression, anomaly or compound.
	Kind string `yaml:"kind" json:"kind,omitempty"`
	// Quantile is p50, p90, p99 or p999 (threshold, trend); p50, p90 or
	// p99 (baseline; none means any of the three).
	Quantile string `yaml:"quantile" json:"quantile,omitempty"`
	// Metric (input_size) is request_bytes or rows. Metric is what a
	// threshold compares instead of a quantile: rate
	// (calls per second) or error_ratio; or whose quantile it compares:
	// a stream quantity of ModelStreamInfer requests, ttfr (time to the
	// first response), response_gap or responses_per_request.
	Metric string `yaml:"metric" json:"metric,omitempty"`
	// Window is how much recent data the condition reads (at most 1m;
	// trend: the regression window, at most 1h).
	Window time.Duration `yaml:"window" json:"window,omitempty"`
	// Op is >, >=, < or <=; "" means >.
	Op string `yaml:"op" json:"op,omitempty"`
	// Value is the threshold: a duration for quantiles ("500ms", or
	// "slo" for the model's SLO), a number for rate and ratio ("0.05" or
	// "5%"), for responses_per_request and for GPU fields.
	Value string `yaml:"value" json:"value,omitempty"`
	// AbovePercent (baseline) is how far above the baseline, in percent
	// of it: 200 means three times the baseline. 0 means the default
	// rise (+25% and four robust spreads).
	AbovePercent float64 `yaml:"above_percent" json:"above_percent,omitempty"`
	// Slope (trend) is a rate of change such as "10ms/min".
	Slope string `yaml:"slope" json:"slope,omitempty"`
	// Codes (errors) are the gRPC code names that count; nil means the
	// server errors (Unknown, DeadlineExceeded, Internal, Unavailable,
	// DataLoss).
	Codes []string `yaml:"codes" json:"codes,omitempty"`
	// Ratio (errors) is the failed fraction above which the condition
	// holds ("5%"); Rate, failed calls per second, instead.
	Ratio string `yaml:"ratio" json:"ratio,omitempty"`
	Rate  string `yaml:"rate" json:"rate,omitempty"`
	// Field (gpu) is utilization, memory_ratio, temperature or
	// throttled.
	Field string `yaml:"field" json:"field,omitempty"`
	// Hints (hint) are cause hints, one of which must be current.
	Hints []string `yaml:"hints" json:"hints,omitempty"`
	// Factor (input_size) is how many times the usual p90 of the
	// model's request bytes (metric request_bytes, the default) or rows
	// (metric rows) the recent p90 must be, with confidence; 0 means 2.
	Factor float64 `yaml:"factor" json:"factor,omitempty"`
	// MinCalls is the least number of calls in the window for the
	// condition to decide at all (besides the confidence bound); 0 means
	// 20 for error conditions.
	MinCalls uint64 `yaml:"min_calls" json:"min_calls,omitempty"`
	// Score (anomaly) is the anomaly score at or over which the
	// condition holds; 0 means anomaly.Threshold (0.9). CriticalScore
	// (0 means 0.99) and CriticalAfter (0 means 10m, negative never)
	// make the alert critical: its worst score reached CriticalScore, or
	// it has fired for CriticalAfter.
	Score         float64       `yaml:"score" json:"score,omitempty"`
	CriticalScore float64       `yaml:"critical_score" json:"critical_score,omitempty"`
	CriticalAfter time.Duration `yaml:"critical_after" json:"critical_after,omitempty"`
}

// Severities.
const (
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// DefaultServerErrorCodes are the codes an errors condition counts by
// default: the server's failures, not the client's mistakes.
var DefaultServerErrorCodes = []string{"Unknown", "DeadlineExceeded", "Internal", "Unavailable", "DataLoss"}

var codeNames = map[string]bool{
	"OK": true, "Canceled": true, "Unknown": true, "InvalidArgument": true, "DeadlineExceeded": true,
	"NotFound": true, "AlreadyExists": true, "PermissionDenied": true, "ResourceExhausted": true,
	"FailedPrecondition": true, "Aborted": true, "OutOfRange": true, "Unimplemented": true,
	"Internal": true, "Unavailable": true, "DataLoss": true, "Unauthenticated": true,
}

// Validate fills defaults and compiles the rules; the error joins every
// problem, each naming the rule and field as written.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.EvaluationInterval == 0 {
		c.EvaluationInterval = time.Second
	}
	if c.EvaluationInterval < 100*time.Millisecond {
		add("evaluation_interval: %v is below 100ms", c.EvaluationInterval)
	}
	for i, s := range c.SLO {
		if s.Model == "" {
			add("slo[%d].model: missing", i)
		} else if _, err := path.Match(s.Model, ""); err != nil {
			add("slo[%d].model: bad glob %q", i, s.Model)
		}
		if s.P50 < 0 || s.P90 < 0 || s.P99 < 0 || s.P50+s.P90+s.P99 == 0 {
			add("slo[%d]: set p50, p90 or p99 to a positive duration", i)
		}
	}
	if c.Baseline.TimeZone != "" {
		if _, err := time.LoadLocation(c.Baseline.TimeZone); err != nil {
			add("baseline.time_zone: %v", err)
		}
	}
	for i, d := range c.Baseline.Holidays {
		if _, err := time.Parse("2006-01-02", d); err != nil {
			add("baseline.holidays[%d]: %q is not a date like 2026-12-25", i, d)
		}
	}
	if u := c.Baseline.Prometheus; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		add("baseline.prometheus: %q is not an http(s) URL", u)
	}
	if c.Baseline.Weeks < 0 || c.Baseline.TimeScale < 0 || math.IsNaN(c.Baseline.TimeScale) || math.IsInf(c.Baseline.TimeScale, 0) {
		add("baseline: weeks and time_scale must not be negative")
	}
	if c.Baseline.Learn < 0 {
		add("baseline.learn: must be 0 (30s) or positive, got %s", c.Baseline.Learn)
	}
	c.schedules = map[string]*schedule{}
	for i, s := range c.Schedules {
		sc, err := s.compile()
		if err != nil {
			add("schedules[%d] (%q): %v", i, s.Name, err)
			continue
		}
		if c.schedules[s.Name] != nil {
			add("schedules[%d]: duplicate name %q", i, s.Name)
		}
		c.schedules[s.Name] = sc
	}
	receivers := map[string]bool{}
	for i := range c.Receivers {
		r := &c.Receivers[i]
		if err := r.Validate(); err != nil {
			errs = append(errs, err)
		}
		if receivers[r.Name] {
			add("receivers[%d]: duplicate name %q", i, r.Name)
		}
		receivers[r.Name] = true
	}
	if c.Route == nil {
		c.Route = &RouteConfig{Receiver: LogReceiver}
	}
	if c.Route.Receiver == "" {
		add("route.receiver: missing (the root route needs a receiver)")
	}
	if c.Route.GroupBy == nil {
		// One message per rule, whatever the number of models it fires
		// for: fifty models failing at once are one incident, not fifty
		// POSTs in a second (Alertmanager's routes group the same way).
		// group_by: [alertname, model] gives a message per model.
		c.Route.GroupBy = []string{"alertname"}
	}
	if c.Route.GroupWait == 0 {
		c.Route.GroupWait = DefaultGroupWait
	}
	if c.Route.GroupInterval == 0 {
		c.Route.GroupInterval = DefaultGroupInterval
	}
	if c.Route.RepeatInterval == 0 {
		c.Route.RepeatInterval = DefaultRepeatInterval
	}
	errs = append(errs, c.checkRoute(c.Route, "route", receivers)...)
	for i, ih := range c.Inhibit {
		if len(ih.SourceMatch) == 0 || len(ih.TargetMatch) == 0 {
			add("inhibit_rules[%d]: source_match and target_match are both required", i)
		}
	}
	if c.Rules == nil {
		c.Rules = DefaultRules(c)
		c.builtin = true
	}
	names := map[string]bool{}
	c.rules = nil
	for i := range c.Rules {
		r, err := compileRule(&c.Rules[i], c)
		if err != nil {
			errs = append(errs, fmt.Errorf("rules[%d] (%q): %w", i, c.Rules[i].Name, err))
			continue
		}
		if names[r.Name] {
			add("rules[%d]: duplicate name %q", i, r.Name)
		}
		names[r.Name] = true
		c.rules = append(c.rules, r)
	}
	return errors.Join(errs...)
}

// LogReceiver is the built-in receiver that writes to the log; it exists
// whatever receivers: says.
const LogReceiver = "log"

func (c *Config) checkRoute(r *RouteConfig, at string, receivers map[string]bool) []error {
	var errs []error
	if r.Receiver != "" && r.Receiver != LogReceiver && !receivers[r.Receiver] {
		errs = append(errs, fmt.Errorf("%s.receiver: no receiver named %q", at, r.Receiver))
	}
	if s := strings.TrimPrefix(r.Schedule, "!"); s != "" && c.schedules[s] == nil {
		errs = append(errs, fmt.Errorf("%s.schedule: no schedule named %q", at, s))
	}
	for k, g := range r.Match {
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("%s.match.%s: bad glob %q", at, k, g))
		}
	}
	if r.GroupWait < 0 {
		errs = append(errs, fmt.Errorf("%s.group_wait: %v, must not be negative", at, r.GroupWait))
	}
	// 0 inherits the parent's; a positive value below the floor would
	// send a notification per evaluation.
	for _, iv := range []struct {
		field string
		v     time.Duration
	}{{"group_interval", r.GroupInterval}, {"repeat_interval", r.RepeatInterval}} {
		if iv.v != 0 && iv.v < MinNotifyInterval {
			errs = append(errs, fmt.Errorf("%s.%s: %v, must be at least %v", at, iv.field, iv.v, MinNotifyInterval))
		}
	}
	for i, ch := range r.Routes {
		errs = append(errs, c.checkRoute(ch, fmt.Sprintf("%s.routes[%d]", at, i), receivers)...)
	}
	return errs
}

// sloFor returns the objectives of model (first matching glob).
func (c *Config) sloFor(model string) (SLOConfig, bool) {
	for _, s := range c.SLO {
		if ok, _ := path.Match(s.Model, model); ok {
			return s, true
		}
	}
	return SLOConfig{}, false
}

// parseRatio reads "0.05" or "5%".
func parseRatio(s string) (float64, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a finite number or a percentage", s)
	}
	if pct {
		v /= 100
	}
	return v, nil
}

// SLOFor returns the objectives of model: the first slo: entry whose glob
// matches.
func (c *Config) SLOFor(model string) (SLOConfig, bool) { return c.sloFor(model) }

// readsAnomaly says whether a rule of c has an anomaly condition: only
// then are the models' anomaly detectors fed.
func (c *Config) readsAnomaly() bool {
	for _, r := range c.rules {
		for _, cd := range r.conds {
			if cd.kind() == KindAnomaly {
				return true
			}
		}
	}
	return false
}
