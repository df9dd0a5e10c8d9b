package alert

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// activeGauges reads infergate_alerts from reg as "alertname/state/severity" -> value.
func activeGauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "infergate_alerts" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[l["alertname"]+"/"+l["state"]+"/"+l["severity"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestActiveAlertsGauge: infergate_alerts shows every rule's zeros and the
// active alerts; a label set no alert holds any more (an escalated
// severity) goes away. It is set in place, never reset, so that a scrape
// during an evaluation cannot see the family empty.
func TestActiveAlertsGauge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := newEngineMetrics(reg)
	rule := &Rule{Name: "Slow", Severity: "warning"}
	escalated := &instance{rule: rule, state: StateFiring, labels: map[string]string{"severity": "critical"}}
	m.observe([]*Rule{rule}, map[string]*instance{"a": escalated}, 0)
	got := activeGauges(t, reg)
	if got["Slow/firing/critical"] != 1 || got["Slow/pending/warning"] != 0 || len(got) != 3 {
		t.Fatalf("with an escalated alert: %v", got)
	}
	m.observe([]*Rule{rule}, map[string]*instance{}, 0)
	got = activeGauges(t, reg)
	if _, ok := got["Slow/firing/critical"]; ok || len(got) != 2 {
		t.Errorf("after it resolved: %v, want the rule's two zeros only", got)
	}
}
