package alert

import (
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor/baseline"
)

// TestRecurringSpike: a critical latency rule on a model whose p99
// rises at 10:00 for 4 minutes every day. Days 1 and 2 page it as new
// (critical, no note); from day 3 it is a warning named as recurring,
// in its labels, evidence and summary; a rise at 15:00 on day 4 still
// pages as new.
func TestRecurringSpike(t *testing.T) {
	var cfg Config
	cfg.Rules = []RuleConfig{{Name: "Spike", Severity: SeverityCritical,
		Condition:   Condition{Kind: KindBaseline, Window: 5 * time.Second},
		Annotations: map[string]string{"summary": summaryTemplate}}}
	r := newRig(t, &cfg)
	calm, slow := calls(1000, ms(100), ms(150), nil), calls(1000, ms(180), ms(300), nil)
	// second plays one second as the correlator does: the model's window
	// is up or not against its baseline, the baseline learns it, the
	// engine steps.
	second := func(rising bool) {
		rs := calm
		if rising {
			rs = slow
		}
		r.src.set("m", rs)
		up := baseline.Up(r.bs.Get("m"), rs, baseline.DefaultRise).Up
		r.bs.Observe("m", baseline.SampleOf(rs), up)
		r.c.add(time.Second)
		r.e.Step()
	}
	// spike plays day (0 = the first) from 10 minutes before hh:00 to
	// 10 minutes after, rising 4 minutes at hh:00, and returns the alert
	// as it first fired.
	spike := func(day, hh int) (fired AlertView) {
		r.c.t = time.Date(2026, 11, 3+day, hh-1, 50, 0, 0, time.UTC)
		for i := range 20 * 60 {
			second(i >= 10*60 && i < 14*60)
			for _, a := range r.e.Alerts() {
				if a.Name == "Spike" && a.State == StateFiring && fired.Name == "" {
					fired = a
				}
			}
		}
		if fired.Name == "" {
			t.Fatalf("day %d: the %02d:00 rise did not fire", day+1, hh)
		}
		return fired
	}
	for day := range 5 {
		a := spike(day, 10)
		recurring := day >= 2
		if got := a.Severity == SeverityWarning && a.Labels["recurring"] == "true" && a.Evidence.Recurring != nil; got != recurring {
			t.Errorf("day %d: severity %s, labels %v, recurring %+v; want recurring %v", day+1, a.Severity, a.Labels, a.Evidence.Recurring, recurring)
		}
		if !recurring && a.Severity != SeverityCritical {
			t.Errorf("day %d: severity %s, want critical (new)", day+1, a.Severity)
		}
		if recurring && !strings.Contains(a.Annotations["summary"], "; recurring: every day at 10:00 for about 4 minutes, ") {
			t.Errorf("day %d: summary %q", day+1, a.Annotations["summary"])
		}
		t.Logf("day %d 10:00: %s: %s", day+1, a.Severity, a.Annotations["summary"])
		if day == 3 {
			b := spike(day, 15)
			if b.Severity != SeverityCritical || b.Evidence.Recurring != nil {
				t.Errorf("day 4 15:00: %s, recurring %+v; want a new critical page", b.Severity, b.Evidence.Recurring)
			}
			t.Logf("day 4 15:00: %s: %s", b.Severity, b.Annotations["summary"])
		}
	}
}
