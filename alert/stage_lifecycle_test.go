package alert

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// TestLifecycleStage: the stage alone moves one alert on one verdict.
func TestLifecycleStage(t *testing.T) {
	t0 := newClock().now()
	cases := []struct {
		name string
		rule RuleConfig
		// before is the alert's state before the step ("" for none),
		// since t0; lastTrue and lastDecided are t0 too.
		before State
		holds  tri
		after  time.Duration // the step's time, after t0
		// want is the state after the step ("" for none); status the
		// alert handed on ("" for none).
		want   State
		status string
		acts   int // actuator calls
	}{
		{name: "new and true becomes pending", rule: RuleConfig{For: time.Minute}, holds: yes, want: StatePending},
		{name: "new with for 0 fires at once", holds: yes, want: StateFiring, status: notify.StatusFiring, acts: 1},
		{name: "new and false is nothing", holds: no},
		{name: "pending for its for fires", rule: RuleConfig{For: time.Minute}, before: StatePending, holds: yes, after: time.Minute,
			want: StateFiring, status: notify.StatusFiring, acts: 1},
		{name: "pending not yet for its for", rule: RuleConfig{For: time.Minute}, before: StatePending, holds: yes, after: 59 * time.Second,
			want: StatePending},
		{name: "pending and false is forgotten", rule: RuleConfig{For: time.Minute}, before: StatePending, holds: no, after: time.Second},
		{name: "firing within keep_firing_for", rule: RuleConfig{KeepFiringFor: time.Minute}, before: StateFiring, holds: no, after: 30 * time.Second,
			want: StateFiring, status: notify.StatusFiring},
		{name: "firing after keep_firing_for resolves", rule: RuleConfig{KeepFiringFor: time.Minute}, before: StateFiring, holds: no, after: time.Minute,
			status: notify.StatusResolved, acts: 1},
		{name: "unknown keeps the state", before: StateFiring, holds: unknown, after: time.Minute, want: StateFiring, status: notify.StatusFiring},
		{name: "no verdict for five minutes resolves", before: StateFiring, holds: unknown, after: 5*time.Minute + time.Second,
			status: notify.StatusResolved, acts: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := tc.rule
			rc.Name, rc.Action = "R", "fallback"
			rc.Condition = Condition{Kind: KindThreshold, Quantile: "p99", Value: "1s"}
			cfg := &Config{Rules: []RuleConfig{rc}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			r := cfg.rules[0]
			act := &fakeActuator{}
			alerts := map[string]*instance{}
			if tc.before != "" {
				a := &instance{rule: r, fp: fingerprint(r, "model", "m"), subject: "m", state: tc.before,
					activeSince: t0, firedAt: t0, lastTrue: t0, lastDecided: t0, acting: tc.before == StateFiring,
					labels: map[string]string{"model": "m"}}
				alerts[a.fp] = a
			}
			l := &lifecycleStage{cfg: cfg, alerts: alerts, silences: newSilenceStore(), actuator: act, log: slog.New(slog.DiscardHandler)}
			now := t0.Add(tc.after)
			s := newStep(testFrame(cfg, &fakeSource{}, nil, nil, now))
			s.verdicts = []verdict{{rule: r, subjectLabel: "model", subject: "m", outcomes: []outcome{{holds: tc.holds}}, holds: tc.holds}}
			l.exec(withNow(context.Background(), now), s)
			var got State
			for _, a := range alerts {
				got = a.state
			}
			if got != tc.want {
				t.Errorf("state %q, want %q", got, tc.want)
			}
			var status string
			if len(s.alerts) == 1 {
				status = s.alerts[0].Status
			}
			if len(s.alerts) > 1 || status != tc.status {
				t.Errorf("handed on %+v, want status %q", s.alerts, tc.status)
			}
			if len(act.calls) != tc.acts {
				t.Errorf("actuator calls %v, want %d", act.calls, tc.acts)
			}
		})
	}
}
