package alert

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPersistStage: the stage alone writes the state file when something
// changed, at most every five seconds, and what it writes restores.
func TestPersistStage(t *testing.T) {
	now := newClock().now()
	cases := []struct {
		name     string
		dirty    bool // before the step (an API write)
		changed  bool // in the step
		lastSave time.Duration
		want     bool // written
	}{
		{name: "nothing changed", lastSave: time.Minute},
		{name: "changed in the step", changed: true, lastSave: time.Minute, want: true},
		{name: "changed by the API", dirty: true, lastSave: time.Minute, want: true},
		{name: "changed, saved 4s ago", changed: true, lastSave: 4 * time.Second},
		{name: "changed, saved 5s ago", changed: true, lastSave: 5 * time.Second, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Rules: []RuleConfig{thresholdRule()}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			r := cfg.rules[0]
			file := filepath.Join(t.TempDir(), "state.json")
			a := &instance{rule: r, fp: fingerprint(r, "model", "m"), subject: "m", state: StatePending, activeSince: now,
				labels: map[string]string{"model": "m"}}
			p := &persistStage{file: file, alerts: map[string]*instance{a.fp: a}, silences: newSilenceStore(),
				groups: map[string]*group{}, log: slog.New(slog.DiscardHandler), dirty: tc.dirty, lastSave: now.Add(-tc.lastSave)}
			s := newStep(nil)
			s.changed = tc.changed
			p.exec(withNow(context.Background(), now), s)
			_, err := os.Stat(file)
			if written := err == nil; written != tc.want {
				t.Fatalf("written %v, want %v", written, tc.want)
			}
			if p.dirty != ((tc.dirty || tc.changed) && !tc.want) {
				t.Errorf("dirty %v after the step", p.dirty)
			}
			if !tc.want {
				return
			}
			q := &persistStage{file: file, alerts: map[string]*instance{}, silences: newSilenceStore(),
				groups: map[string]*group{}, log: p.log}
			if err := q.load(cfg.rules, &lifecycleStage{log: p.log}, now); err != nil {
				t.Fatal(err)
			}
			if b := q.alerts[a.fp]; b == nil || b.state != StatePending || b.subject != "m" {
				t.Errorf("restored %+v", q.alerts)
			}
		})
	}
}
