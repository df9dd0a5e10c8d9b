package alert

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/infergate/infergate/proto/methods"
)

// promRuleFile is a Prometheus rule file.
type promRuleFile struct {
	Groups []promGroup `yaml:"groups"`
}

type promGroup struct {
	Name     string     `yaml:"name"`
	Interval string     `yaml:"interval,omitempty"`
	Rules    []promRule `yaml:"rules"`
}

type promRule struct {
	Alert         string            `yaml:"alert"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for,omitempty"`
	KeepFiringFor string            `yaml:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels,omitempty"`
	Annotations   map[string]string `yaml:"annotations,omitempty"`
}

// minPromWindow is the shortest range a fleet's Prometheus can rate over
// with the usual 15s scrape interval (four scrapes).
const minPromWindow = time.Minute

// ExportPrometheus writes the threshold, error and SLO rules of a
// validated Config as a Prometheus rule file over infergate's own metrics
// (infergate_request_duration_seconds and infergate_requests_total),
// summed across replicas so that a fleet's Prometheus evaluates them over
// every replica's traffic. Baseline, trend, GPU, hint and compound rules
// need infergate's in-memory state; they are listed in a comment instead.
func ExportPrometheus(c *Config) ([]byte, error) {
	g := promGroup{Name: "infergate"}
	var skipped []string
	for _, r := range c.rules {
		if len(r.conds) != 1 {
			skipped = append(skipped, r.Name+" (compound)")
			continue
		}
		cd, ok := r.conds[0].(promCondition)
		if !ok {
			skipped = append(skipped, fmt.Sprintf("%s (%s: needs infergate's in-memory state)", r.Name, r.conds[0].kind()))
			continue
		}
		for _, pe := range cd.prom(r, c) {
			pr := promRule{Alert: r.Name, Expr: pe.expr, Labels: map[string]string{"severity": r.Severity}, Annotations: map[string]string{}}
			if r.For > 0 {
				pr.For = promDuration(r.For)
			}
			if r.KeepFiringFor > 0 {
				pr.KeepFiringFor = promDuration(r.KeepFiringFor)
			}
			for k, v := range r.Labels {
				pr.Labels[k] = v
			}
			for k, v := range pe.labels {
				pr.Labels[k] = v
			}
			for k, v := range r.Config.Annotations {
				pr.Annotations[k] = promTemplate(v, pe)
			}
			if len(pr.Annotations) == 0 {
				pr.Annotations = nil
			}
			g.Rules = append(g.Rules, pr)
		}
	}
	b, err := yaml.Marshal(promRuleFile{Groups: []promGroup{g}})
	if err != nil {
		return nil, err
	}
	head := "# Prometheus rules exported by `infergate rules export`: the threshold, error and SLO\n" +
		"# rules over infergate's histogram and counters, summed across replicas.\n"
	if len(skipped) > 0 {
		slices.Sort(skipped)
		head += "# Not exported (they need infergate's own evaluation):\n"
		for _, s := range skipped {
			head += "#   " + s + "\n"
		}
	}
	return append([]byte(head), b...), nil
}

func monitorQuantile(i int) float64 { return [...]float64{0.5, 0.9, 0.99, 0.999}[i] }

// quantileExpr is histogram_quantile over the replicas' summed native
// histograms, guarded by a minimum number of calls: fewer than 1/(1-q)
// calls in the window do not define the quantile. The native buckets are
// what the fleet dashboard reads, 2^(1/32) wide (within 2.2%), where the
// classic ones put a 150 ms p99 at about 245 ms. A Prometheus before 2.45
// stores a histogram either native (native histograms enabled, as
// examples/prometheus configures) or classic, never both, so each half
// falls back to the classic buckets (_bucket, _count) for models without
// native series: a rule over only one form would never fire on the other
// Prometheus. The fallback sits inside the comparison, so where both
// forms are stored the native one decides.
func quantileExpr(q float64, sel, window, op string, v float64) string {
	const h = "infergate_request_duration_seconds"
	minCalls := math.Ceil(1 / (1 - q))
	quantile := fmt.Sprintf("histogram_quantile(%[1]s, sum by (model) (rate(%[2]s{%[3]s}[%[4]s])))"+
		" or histogram_quantile(%[1]s, sum by (le, model) (rate(%[2]s_bucket{%[3]s}[%[4]s])))", num(q), h, sel, window)
	calls := fmt.Sprintf("histogram_count(sum by (model) (increase(%[1]s{%[2]s}[%[3]s])))"+
		" or sum by (model) (increase(%[1]s_count{%[2]s}[%[3]s]))", h, sel, window)
	return fmt.Sprintf("((%s) %s %s) and ((%s) >= %s)", quantile, op, num(v), calls, num(minCalls))
}

// promSelector turns globs into label matchers.
func promSelector(s selector) string {
	var out []string
	add := func(label, g string) {
		if g != "" && g != "*" {
			out = append(out, fmt.Sprintf(`%s=~"%s"`, label, globRegexp(g)))
		}
	}
	add("model", s.model)
	add("version", s.version)
	add("upstream", s.upstream)
	if s.method != "" {
		add("method", s.method)
	} else {
		out = append(out, fmt.Sprintf(`method=~".*/(%s)"`, strings.Join(methods.InferenceNames(), "|")))
	}
	return strings.Join(out, ",")
}

// globRegexp translates a path.Match glob into an RE2 regexp body.
func globRegexp(g string) string {
	var b strings.Builder
	for _, r := range g {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	// Prometheus label values are in double quotes: escape backslashes.
	return strings.ReplaceAll(b.String(), `\`, `\\`)
}

// promTemplate rewrites infergate's annotation templates for Prometheus:
// .Labels.x is $labels.x, .Value and .Current are $value, and
// .Threshold, which Prometheus does not know, the rule's threshold as a
// string literal. .Summary and .Fired say what fires in words ("p99
// 312ms, over its SLO 250ms"): Prometheus keeps the annotations of its
// last evaluation that held while an alert keeps firing, so the value
// they show is one that was over the bound. .Now and .Cause, which need
// infergate's evaluation, point there.
func promTemplate(s string, pe promExpr) string {
	fired := promFired(pe)
	s = strings.ReplaceAll(s, ".Labels.", "$labels.")
	s = strings.ReplaceAll(s, ".Threshold", strconv.Quote(pe.threshold))
	s = strings.ReplaceAll(s, ".Value", "$value")
	s = strings.ReplaceAll(s, ".Current", "$value")
	s = strings.ReplaceAll(s, ".Evidence", `"(see infergate)"`)
	s = strings.ReplaceAll(s, ".Summary", fired)
	s = strings.ReplaceAll(s, ".Fired", fired)
	s = strings.ReplaceAll(s, ".Now", `"now: see infergate's /api/v1/alerts"`)
	s = strings.ReplaceAll(s, ".Cause", `""`)
	return s
}

// promFired is a template expression for Prometheus that says the value
// against its bound: (printf "p99 %s, over its SLO 250ms" ($value |
// humanizeDuration)).
func promFired(pe promExpr) string {
	value := "($value | humanize)"
	switch pe.said.unit {
	case "s":
		value = "($value | humanizeDuration)"
	case "ratio":
		value = "($value | humanizePercentage)"
	}
	format := strings.ReplaceAll(pe.said.measure, "%", "%%") + " %s"
	if pe.said.unit == "1/s" {
		format += "/s"
	}
	format += ", " + overWord(pe.said.op) + " " + pe.said.bound + " " + strings.ReplaceAll(pe.threshold, "%", "%%")
	return "(printf " + strconv.Quote(format) + " " + value + ")"
}

func promDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d%time.Second == 0:
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	return strconv.Itoa(int(d/time.Millisecond)) + "ms"
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
