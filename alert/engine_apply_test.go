package alert

import (
	"testing"
	"time"
)

// TestApplyKeepsUnchangedRulesAlerts: a reload that keeps a rule as
// written keeps its firing alert (no action restarted, no new page); one
// that changes the rule resolves its alert and stops its action, and the
// new rule starts from nothing.
func TestApplyKeepsUnchangedRulesAlerts(t *testing.T) {
	act := &fakeActuator{}
	r, rule := actionRig(t, act)
	r.run(3 * time.Second)
	if r.state("HighP99", "m") != StateFiring || len(act.calls) != 1 {
		t.Fatalf("before Apply: state %q, actions %v; want firing, one start", r.state("HighP99", "m"), act.calls)
	}
	r.sink.take()

	other := RuleConfig{Name: "Other", Condition: Condition{Kind: KindThreshold, Quantile: "p50", Window: time.Minute, Value: "1s"}, Severity: SeverityWarning}
	same := &Config{Rules: []RuleConfig{rule, other}, Route: &RouteConfig{Receiver: "log", GroupWait: time.Second, GroupInterval: time.Second}}
	if err := same.Validate(); err != nil {
		t.Fatal(err)
	}
	ended, err := r.e.Apply(same)
	if err != nil || len(ended) != 0 {
		t.Fatalf("Apply with the rule unchanged: ended %v, err %v", ended, err)
	}
	r.run(3 * time.Second)
	if r.state("HighP99", "m") != StateFiring || len(act.calls) != 1 {
		t.Errorf("after Apply of the same rule: state %q, actions %v; want still firing, no new action", r.state("HighP99", "m"), act.calls)
	}
	if len(r.e.Rules()) != 2 {
		t.Errorf("rules after Apply: %d, want 2", len(r.e.Rules()))
	}

	changed := rule
	changed.Condition.Value = "950ms" // above the p99 of 900ms: the new rule does not hold
	cfg := &Config{Rules: []RuleConfig{changed}, Route: same.Route}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ended, err = r.e.Apply(cfg)
	if err != nil || len(ended) != 1 || ended[0] != "HighP99" {
		t.Fatalf("Apply with the threshold changed: ended %v, err %v; want [HighP99]", ended, err)
	}
	if len(act.calls) != 2 || act.calls[1] != "stop fallback m" {
		t.Errorf("the changed rule's action was not stopped: %v", act.calls)
	}
	r.run(3 * time.Second) // past the group's interval
	msgs, _ := r.sink.take()
	resolved := false
	for _, m := range msgs {
		for _, a := range m.Alerts {
			resolved = resolved || a.Status == "resolved"
		}
	}
	if !resolved {
		t.Errorf("no resolved notice for the alert of the changed rule: %+v", msgs)
	}
	if got := r.e.Rules()[0].Value; got != "950ms" {
		t.Errorf("rule value after Apply %q, want 950ms", got)
	}

}
