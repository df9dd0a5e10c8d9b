package alert

import (
	"context"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// muteFunc adapts a function to the muter interface.
type muteFunc func(ctx context.Context, a notify.Alert, active []notify.Alert) string

func (f muteFunc) mutes(ctx context.Context, a notify.Alert, active []notify.Alert) string {
	return f(ctx, a, active)
}

// TestMuteStage: the stage alone, with each muter, records why each
// firing alert is muted; resolved alerts are never muted, and the first
// stage's reason stands.
func TestMuteStage(t *testing.T) {
	now := newClock().now()
	gpuAlert := notify.Alert{Name: "GPUSaturated", Fingerprint: "g", Status: notify.StatusFiring,
		Labels: map[string]string{"kind": "gpu", "gpu": "GPU-1"}}
	latency := func(fp, gpuID, status string) notify.Alert {
		return notify.Alert{Name: "Latency", Fingerprint: fp, Status: status,
			Labels: map[string]string{"kind": "latency", "gpu": gpuID, "model": "m-" + fp}}
	}
	silences := newSilenceStore()
	if _, err := silences.add(Silence{ID: "x", Matchers: []Matcher{{Name: "model", Value: "m-s*"}}, StartsAt: now, EndsAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	silenceID := silences.all()[0].ID
	cases := []struct {
		name   string
		muters []muter
		alerts []notify.Alert
		want   map[string]string
	}{
		{
			name:   "inhibited on the same GPU only",
			muters: []muter{inhibitor(DefaultInhibit())},
			alerts: []notify.Alert{gpuAlert, latency("a", "GPU-1", notify.StatusFiring), latency("b", "GPU-2", notify.StatusFiring)},
			want:   map[string]string{"a": "inhibited by GPUSaturated gpu=GPU-1"},
		},
		{
			name:   "a resolved source inhibits nothing",
			muters: []muter{inhibitor(DefaultInhibit())},
			alerts: []notify.Alert{{Name: "GPUSaturated", Fingerprint: "g", Status: notify.StatusResolved, Labels: gpuAlert.Labels},
				latency("a", "GPU-1", notify.StatusFiring)},
			want: map[string]string{},
		},
		{
			name:   "a resolved target is never muted",
			muters: []muter{inhibitor(DefaultInhibit()), silencer{silences}},
			alerts: []notify.Alert{gpuAlert, latency("a", "GPU-1", notify.StatusResolved), latency("s1", "GPU-9", notify.StatusResolved)},
			want:   map[string]string{},
		},
		{
			name:   "silenced",
			muters: []muter{silencer{silences}},
			alerts: []notify.Alert{latency("s1", "GPU-9", notify.StatusFiring), latency("b", "GPU-9", notify.StatusFiring)},
			want:   map[string]string{"s1": "silenced by " + silenceID},
		},
		{
			name:   "inhibition first, then silences",
			muters: []muter{inhibitor(DefaultInhibit()), silencer{silences}},
			alerts: []notify.Alert{gpuAlert, latency("s1", "GPU-1", notify.StatusFiring), latency("s2", "GPU-2", notify.StatusFiring)},
			want:   map[string]string{"s1": "inhibited by GPUSaturated gpu=GPU-1", "s2": "silenced by " + silenceID},
		},
		{
			name: "any muter",
			muters: []muter{muteFunc(func(_ context.Context, a notify.Alert, active []notify.Alert) string {
				if len(active) == 2 && a.Fingerprint == "b" {
					return "by a test"
				}
				return ""
			})},
			alerts: []notify.Alert{latency("a", "", notify.StatusFiring), latency("b", "", notify.StatusFiring)},
			want:   map[string]string{"b": "by a test"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStep(nil)
			s.alerts = tc.alerts
			ctx := withNow(context.Background(), now)
			for _, m := range tc.muters {
				muteStage{m}.exec(ctx, s)
			}
			if len(s.muted) != len(tc.want) {
				t.Errorf("muted %v, want %v", s.muted, tc.want)
			}
			for fp, why := range tc.want {
				if s.muted[fp] != why {
					t.Errorf("%s: %q, want %q", fp, s.muted[fp], why)
				}
			}
		})
	}
}
