package alert

import (
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
)

// streams builds a window of n stream requests whose TTFR and gap
// quantiles are all at the given values, bounded (plenty of evidence) or,
// with few requests, not; responses per request are resp.
func streams(n uint64, ttfr, gap time.Duration, resp float64) monitor.RecentStats {
	rs := monitor.RecentStats{Stream: &monitor.RecentStream{}}
	set := func(q monitor.StreamQuantity, count uint64, v time.Duration) {
		rs.Stream.Stats[q] = monitor.Stats{Count: count, P50: v, P90: v, P99: v, P999: v, Max: v}
		for i := range monitor.Quantiles {
			if _, ok := monitor.LowerBoundRank(count, monitor.Quantiles[i]); ok {
				rs.Stream.Bounds[q].OK[i], rs.Stream.Bounds[q].Lower[i] = true, v
			}
		}
	}
	set(monitor.StreamFirstResponse, n, ttfr)
	set(monitor.StreamResponseGap, n*uint64(resp-1), gap)
	set(monitor.StreamResponses, n, monitor.ResponsesValue(resp))
	return rs
}

func TestStreamConditionsParse(t *testing.T) {
	cases := []struct {
		name string
		cond Condition
		err  string // "" for valid
	}{
		{"ttfr p99", Condition{Kind: KindThreshold, Metric: "ttfr", Quantile: "p99", Value: "500ms"}, ""},
		{"gap p50 below", Condition{Kind: KindThreshold, Metric: "response_gap", Quantile: "p50", Op: "<", Value: "5ms"}, ""},
		{"responses", Condition{Kind: KindThreshold, Metric: "responses_per_request", Quantile: "p90", Value: "200"}, ""},
		{"no quantile", Condition{Kind: KindThreshold, Metric: "ttfr", Value: "500ms"}, `quantile: missing (metric: ttfr reads a quantile)`},
		{"bad quantile", Condition{Kind: KindThreshold, Metric: "ttfr", Quantile: "p95", Value: "1s"}, `quantile: "p95", want p50, p90, p99 or p999`},
		{"slo", Condition{Kind: KindThreshold, Metric: "response_gap", Quantile: "p99", Value: "slo"},
			`value: "slo", want a duration like 500ms (metric: response_gap has no slo)`},
		{"count as duration", Condition{Kind: KindThreshold, Metric: "responses_per_request", Quantile: "p50", Value: "2s"},
			`value: "2s", want a number of responses like 20`},
		{"baseline", Condition{Kind: KindBaseline, Metric: "ttfr", Quantile: "p99"},
			`metric: "ttfr", baseline conditions read the calls' latency (use threshold for stream metrics)`},
		{"unknown metric", Condition{Kind: KindThreshold, Metric: "ttft", Value: "1s"},
			`quantile: missing (or metric: rate | error_ratio | response_gap | responses_per_request | ttfr)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Rules: []RuleConfig{{Name: "S", Condition: tc.cond}}}
			err := cfg.Validate()
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if want := `rules[0] ("S"): ` + tc.err; err == nil || err.Error() != want {
				t.Fatalf("Validate: %v, want %q", err, want)
			}
		})
	}
}

// TestStreamRule: ttfr_p99 > 500ms fires on a slow first response and not
// on slow gaps, is unknown while the requests are too few, and is listed,
// not exported, for a fleet's Prometheus.
func TestStreamRule(t *testing.T) {
	cfg := &Config{Rules: []RuleConfig{
		{Name: "SlowFirstToken", Condition: Condition{Kind: KindThreshold, Metric: "ttfr", Quantile: "p99", Window: 10 * time.Second, Value: "500ms"}},
		{Name: "ShortAnswers", Condition: Condition{Kind: KindThreshold, Metric: "responses_per_request", Quantile: "p50", Op: "<", Value: "4"}},
	}}
	r := newRig(t, cfg)
	r.src.set("llm", streams(2000, ms(200), ms(900), 16))
	r.src.set("resnet50", calls(2000, ms(5), ms(9), nil)) // no streams: not a subject
	r.run(3 * time.Second)
	if got := r.e.Alerts(); len(got) != 0 {
		t.Fatalf("slow gaps alone raised %+v", got)
	}
	r.src.set("llm", streams(2000, ms(800), ms(20), 3))
	r.run(2 * time.Second)
	if s := r.state("SlowFirstToken", "llm"); s != StateFiring {
		t.Fatalf("TTFR p99 800ms: %q, want firing", s)
	}
	if s := r.state("ShortAnswers", "llm"); s != StateFiring {
		t.Fatalf("3 responses per request: %q, want firing", s)
	}
	var ev CondEvidence
	for _, a := range r.e.Alerts() {
		if a.Name == "SlowFirstToken" {
			ev = a.Evidence.Conditions[0]
		}
	}
	if !strings.Contains(ev.Note, "ttfr p99 lower bound") || ev.Value != "800ms" || ev.Threshold != "500ms" {
		t.Errorf("evidence %+v", ev)
	}
	r.src.set("llm", streams(20, ms(900), ms(20), 3))
	r.run(2 * time.Second)
	for _, a := range r.e.Alerts() {
		if a.Name == "SlowFirstToken" && (a.Evidence.Conditions[0].Holds != "unknown" || !strings.Contains(a.Evidence.Conditions[0].Note, "too few requests")) {
			t.Errorf("20 requests: %+v", a.Evidence.Conditions[0])
		}
	}
	out, err := ExportPrometheus(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "SlowFirstToken (threshold: needs infergate's in-memory state)") || strings.Contains(string(out), "alert: SlowFirstToken") {
		t.Errorf("export:\n%s", out)
	}
}
