package alert

import "time"

// DefaultRules returns the rules that run when no rules are configured:
// what a user wants on day one.
//
//   - ModelErrorRatio (critical): more than 1% of a model's calls in the
//     last 2s failed with a server error (Unknown, DeadlineExceeded,
//     Internal, Unavailable, DataLoss), with confidence.
//   - ModelLatencyAboveBaseline (warning): the model's p50, p90 or p99
//     over the last 5s is, with confidence, above its seasonal baseline
//     (+25% and four robust spreads, at least 1ms): sensitive enough to
//     fire on a ×1.47 slowdown within seconds at 100 calls/s, and silent
//     on one slow call or a daily peak the baseline knows. Kept firing
//     for 30s so a recovering model does not flap.
//   - GPUSaturated (warning): a GPU is over 95% busy for 30s; it inhibits
//     the latency alerts of the models on that GPU (the cause, once).
//   - ModelAnomaly, only with alerting.anomaly: true (warning, critical once its score reaches 0.99 or it
//     has fired for 10m): the model's anomaly score (package anomaly) at
//     or over 0.9 for 30s: a change spread over several of its features
//     (calls halve at flat latency, the queue grows at flat p99, a few
//     errors with a slower p50) that the rules above miss. Its detector
//     learns for its first ~3 minutes of normal seconds and never fires
//     meanwhile, so a cold start is quiet; the 30s keep a one-off second
//     from paging. The summary's cause is the detector's explanation.
//   - VersionRegression (critical): a model's release was rolled back
//     (its candidate was worse than the stable version, gone from the
//     server, or rolled back by an operator). The summary is the
//     rollback's evidence in words. It fires while the release stays
//     rolled back and resolves when the release is restarted (changed at
//     a reload) or removed; an acknowledgement stops its repeats.
//   - ModelOverSLO (critical), only when slo: sets a p99: the model's p99
//     over the last minute is, with confidence, over its SLO for 1m.
func DefaultRules(c *Config) []RuleConfig {
	rules := []RuleConfig{
		{
			Name:      "ModelErrorRatio",
			Condition: Condition{Kind: KindErrors, Ratio: "1%", Window: 2 * time.Second},
			Severity:  SeverityCritical,
			Labels:    map[string]string{"kind": "errors"},
			Annotations: map[string]string{
				"summary": "{{.Labels.model}}: {{.Summary}}",
			},
			KeepFiringFor: 30 * time.Second,
		},
		{
			Name:      "ModelLatencyAboveBaseline",
			Condition: Condition{Kind: KindBaseline, Window: 5 * time.Second},
			Severity:  SeverityWarning,
			Labels:    map[string]string{"kind": "latency"},
			Annotations: map[string]string{
				"summary": "{{.Labels.model}}: {{.Summary}}",
			},
			KeepFiringFor: 30 * time.Second,
		},
		{
			Name:      "GPUSaturated",
			Condition: Condition{Kind: KindGPU, Field: "utilization", Value: "0.95"},
			Severity:  SeverityWarning,
			For:       30 * time.Second,
			Labels:    map[string]string{"kind": "gpu"},
			Annotations: map[string]string{
				"summary": "GPU {{.Labels.gpu}}: {{.Summary}}",
			},
		},
	}
	if c.Anomaly {
		rules = append(rules, ModelAnomalyRule())
	}
	rules = append(rules, RuleConfig{
		Name:      "VersionRegression",
		Condition: Condition{Kind: KindVersionRegression},
		Severity:  SeverityCritical,
		Labels:    map[string]string{"kind": KindVersionRegression},
		Annotations: map[string]string{
			"summary": "{{.Labels.model}}: {{.Value}}",
		},
	})
	return sloRules(c, rules)
}

// ModelAnomalyRule is the built-in anomaly rule (alerting.anomaly: true
// adds it to the defaults).
func ModelAnomalyRule() RuleConfig {
	return RuleConfig{
		Name:      "ModelAnomaly",
		Condition: Condition{Kind: KindAnomaly},
		Severity:  SeverityWarning,
		For:       30 * time.Second,
		Labels:    map[string]string{"kind": KindAnomaly},
		Annotations: map[string]string{
			"summary": "{{.Labels.model}}: {{.Summary}}",
		},
		KeepFiringFor: 30 * time.Second,
	}
}

// sloRules appends the rules of c's SLOs to rules.
func sloRules(c *Config, rules []RuleConfig) []RuleConfig {
	for _, s := range c.SLO {
		if s.P99 > 0 {
			rules = append(rules, RuleConfig{
				Name:      "ModelOverSLO",
				Condition: Condition{Kind: KindThreshold, Quantile: "p99", Window: time.Minute, Value: "slo"},
				Severity:  SeverityCritical,
				For:       time.Minute,
				Labels:    map[string]string{"kind": "latency"},
				Annotations: map[string]string{
					"summary": "{{.Labels.model}}: {{.Summary}}",
				},
			})
			break
		}
	}
	return rules
}

// DefaultInhibit is used when no inhibit_rules are configured: a firing
// GPU alert mutes the latency alerts of the models on that GPU.
func DefaultInhibit() []InhibitConfig {
	return []InhibitConfig{{
		SourceMatch: map[string]string{"kind": "gpu"},
		TargetMatch: map[string]string{"kind": "latency"},
		Equal:       []string{"gpu"},
	}}
}
