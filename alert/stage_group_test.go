package alert

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// TestGroupStage: the stage alone routes unmuted alerts to groups by
// receiver and group_by labels.
func TestGroupStage(t *testing.T) {
	now := newClock().now() // Tuesday 14:00 UTC
	alert := func(fp, name, model, status string) notify.Alert {
		return notify.Alert{Name: name, Fingerprint: fp, Status: status,
			Labels: map[string]string{"alertname": name, "model": model, "severity": "warning"}}
	}
	cases := []struct {
		name   string
		route  *RouteConfig
		alerts []notify.Alert
		muted  map[string]string
		want   map[string][]string // group key -> fingerprints
	}{
		{
			name:   "group by alertname and model",
			route:  &RouteConfig{Receiver: "log", GroupBy: []string{"alertname", "model"}},
			alerts: []notify.Alert{alert("1", "A", "m1", notify.StatusFiring), alert("2", "A", "m2", notify.StatusFiring)},
			want:   map[string][]string{"log{alertname=A,model=m1}": {"1"}, "log{alertname=A,model=m2}": {"2"}},
		},
		{
			// Issue 21: fifty models failing at once are one message per
			// rule, not one per model.
			name:  "the default groups by alertname across models",
			route: &RouteConfig{Receiver: "log"},
			alerts: []notify.Alert{alert("1", "A", "m1", notify.StatusFiring), alert("2", "A", "m2", notify.StatusFiring),
				alert("3", "B", "m1", notify.StatusFiring)},
			want: map[string][]string{"log{alertname=A}": {"1", "2"}, "log{alertname=B}": {"3"}},
		},
		{
			name:   "muted alerts are not routed",
			route:  &RouteConfig{Receiver: "log", GroupBy: []string{"alertname"}},
			alerts: []notify.Alert{alert("1", "A", "m1", notify.StatusFiring), alert("2", "A", "m2", notify.StatusFiring)},
			muted:  map[string]string{"2": "silenced by x"},
			want:   map[string][]string{"log{alertname=A}": {"1"}},
		},
		{
			name:   "a resolved alert never notified makes no group",
			route:  &RouteConfig{Receiver: "log"},
			alerts: []notify.Alert{alert("1", "A", "m1", notify.StatusResolved)},
			want:   map[string][]string{},
		},
		{
			name: "first matching child route, schedule-aware",
			route: &RouteConfig{Receiver: "log", GroupBy: []string{"alertname"}, Routes: []*RouteConfig{
				{Match: map[string]string{"model": "bert*"}, Receiver: "nlp"},
				{Schedule: "!business", Receiver: "pager"},
				{Schedule: "business", Receiver: "chat"},
			}},
			alerts: []notify.Alert{alert("1", "A", "bert-base", notify.StatusFiring), alert("2", "A", "resnet", notify.StatusFiring)},
			want:   map[string][]string{"nlp/0{alertname=A}": {"1"}, "chat/2{alertname=A}": {"2"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Route: tc.route, Rules: []RuleConfig{},
				Receivers: []notify.ReceiverConfig{{Name: "nlp"}, {Name: "pager"}, {Name: "chat"}},
				Schedules: []ScheduleConfig{{Name: "business", Weekdays: []string{"tuesday"}, Start: "09:00", End: "18:00"}}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			st := groupStage{cfg: cfg, groups: map[string]*group{}}
			s := newStep(nil)
			s.alerts = tc.alerts
			for fp, why := range tc.muted {
				s.muted[fp] = why
			}
			st.exec(withNow(context.Background(), now), s)
			got := map[string][]string{}
			for _, g := range s.groups {
				for fp := range g.alerts {
					got[g.Key] = append(got[g.Key], fp)
				}
				slices.Sort(got[g.Key])
			}
			if len(got) != len(tc.want) || len(s.groups) != len(st.groups) {
				t.Fatalf("groups %v, want %v", got, tc.want)
			}
			for k, fps := range tc.want {
				if !slices.Equal(got[k], fps) {
					t.Errorf("group %s: %v, want %v", k, got[k], fps)
				}
			}
		})
	}
}

// TestGroupStageForgetsQuietGroups: a group empty for an hour since its
// last message goes; one that sent recently stays.
func TestGroupStageForgetsQuietGroups(t *testing.T) {
	now := newClock().now()
	cfg := &Config{Rules: []RuleConfig{}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rt := routed{receiver: "log"}
	st := groupStage{cfg: cfg, groups: map[string]*group{
		"old":    {Key: "old", LastFlush: now.Add(-time.Hour - time.Second), rt: rt},
		"recent": {Key: "recent", LastFlush: now.Add(-time.Minute), rt: rt},
	}}
	s := newStep(nil)
	st.exec(withNow(context.Background(), now), s)
	if _, ok := st.groups["old"]; ok || st.groups["recent"] == nil || len(s.groups) != 1 {
		t.Errorf("groups %v, handed on %d; want only recent", st.groups, len(s.groups))
	}
}
