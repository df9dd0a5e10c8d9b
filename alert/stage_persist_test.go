package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/internal/statefile"
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
			p := &persistStage{file: file, outbox: &outbox{log: slog.New(slog.DiscardHandler)}, alerts: map[string]*instance{a.fp: a}, silences: newSilenceStore(),
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
			q := &persistStage{file: file, outbox: &outbox{log: slog.New(slog.DiscardHandler)}, alerts: map[string]*instance{}, silences: newSilenceStore(),
				groups: map[string]*group{}, log: p.log}
			q.load(cfg.rules, &lifecycleStage{log: p.log}, now)
			if q.reset != nil {
				t.Fatalf("reset: %+v", q.reset)
			}
			if b := q.alerts[a.fp]; b == nil || b.state != StatePending || b.subject != "m" {
				t.Errorf("restored %+v", q.alerts)
			}
		})
	}
}

// TestDamagedStateFileIsSetAside: a state file that cannot be used (the
// shapes that crashed or stopped infergate) is moved aside, counted, and
// the engine starts empty instead of failing; the API says so.
func TestDamagedStateFileIsSetAside(t *testing.T) {
	huge := make([]byte, maxStateFileSize+1)
	for i := range huge {
		huge[i] = ' '
	}
	cases := map[string][]byte{
		"null group":   []byte(`{"version":1,"groups":{"x":null}}`),
		"truncated":    []byte(`{"version":1,"alerts":[{"rule":"x",`),
		"empty":        {},
		"random bytes": {0x9c, 0x01, 0xff, 0x00, 0x7f, 0x42},
		"old version":  []byte(`{"version":0}`),
		"over 16 MiB":  huge,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "state.json")
			if err := os.WriteFile(file, content, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := &Config{Rules: []RuleConfig{thresholdRule()}, StateFile: file}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			clk := newClock()
			e, err := New(Options{Config: cfg, Latency: &fakeSource{}, Now: clk.now, Send: func(string, *notify.Message) {},
				Logger: slog.New(slog.DiscardHandler), FileMetrics: statefile.NewMetrics(reg)})
			if err != nil {
				t.Fatalf("New: %v (a damaged state file must not stop the engine)", err)
			}
			defer e.Close()
			e.Step() // and it evaluates
			r := e.StateReset()
			if name == "null group" {
				// Parsed: the null group alone is skipped.
				if r != nil {
					t.Fatalf("reset %+v; want the bad entry skipped", r)
				}
				return
			}
			if r == nil || r.Aside == "" || r.Reason == "" {
				t.Fatalf("reset %+v", r)
			}
			if _, err := os.Stat(file); err == nil {
				// Close saves a fresh file: that is fine, but not before.
				t.Logf("state file present (saved again)")
			}
			aside, err := os.ReadFile(r.Aside)
			if err != nil || len(aside) != len(content) {
				t.Fatalf("set aside as %s: %v (%d bytes, want %d)", r.Aside, err, len(aside), len(content))
			}
			if !strings.HasPrefix(filepath.Base(r.Aside), "state.json.corrupt-") {
				t.Errorf("aside name %s", r.Aside)
			}
			if got := counterValue(t, reg, "infergate_state_file_damaged_total"); got != 1 {
				t.Errorf("infergate_state_file_damaged_total = %v, want 1", got)
			}
		})
	}
}

// TestStateFileBounds: a crafted state file with far more silences and
// groups than the limits restores only up to them, drops invalid
// silences (match-all, too many matchers), and restored groups that no
// alert is routed to again are forgotten.
func TestStateFileBounds(t *testing.T) {
	now := newClock().now()
	sf := stateFile{Version: stateVersion, Saved: now, Groups: map[string]*group{}}
	for i := range 3000 {
		sf.Silences = append(sf.Silences, Silence{ID: fmt.Sprint(i), Matchers: []Matcher{{Name: "model", Value: fmt.Sprint("m", i)}},
			StartsAt: now, EndsAt: now.Add(time.Hour)})
	}
	sf.Silences[0].Matchers = []Matcher{{Name: "x", Value: "*"}} // mutes everything
	for i := range maxRestoredGroups + 500 {
		k := fmt.Sprint("g", i)
		sf.Groups[k] = &group{Key: k, Receiver: "log", Created: now}
	}
	b, err := json.Marshal(sf)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Rules: []RuleConfig{thresholdRule()}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := &persistStage{file: file, outbox: &outbox{log: slog.New(slog.DiscardHandler)}, alerts: map[string]*instance{}, silences: newSilenceStore(), groups: map[string]*group{},
		log: slog.New(slog.DiscardHandler)}
	p.load(cfg.rules, &lifecycleStage{log: p.log}, now)
	if n := len(p.silences.all()); n != maxSilences {
		t.Errorf("%d silences restored, want %d", n, maxSilences)
	}
	for _, si := range p.silences.all() {
		if si.ID == "0" {
			t.Errorf("the match-all silence was restored")
		}
	}
	if n := len(p.groups); n != maxRestoredGroups {
		t.Errorf("%d groups restored, want %d", n, maxRestoredGroups)
	}
	// No alert routes to them: they go after restoredGroupTTL.
	gs := groupStage{cfg: cfg, groups: p.groups}
	gs.exec(withNow(context.Background(), now.Add(time.Minute)), newStep(nil))
	if len(p.groups) != maxRestoredGroups {
		t.Fatalf("groups forgotten too early: %d left", len(p.groups))
	}
	gs.exec(withNow(context.Background(), now.Add(restoredGroupTTL+time.Second)), newStep(nil))
	if len(p.groups) != 0 {
		t.Errorf("%d restored groups left after %s", len(p.groups), restoredGroupTTL)
	}
}

// TestStateSaveFailureIsRetried: a save into a folder that cannot be
// written is counted and retried at the next save, and the state stays
// dirty until one works.
func TestStateSaveFailureIsRetried(t *testing.T) {
	if os.Geteuid() == 0 {
		// root writes into read-only folders: make the "folder" a file.
		t.Log("running as root: the state file's folder is a plain file instead of a read-only folder")
	}
	dir := t.TempDir()
	blocker := filepath.Join(dir, "sub")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := statefile.NewMetrics(reg)
	now := newClock().now()
	p := &persistStage{file: filepath.Join(blocker, "state.json"), outbox: &outbox{log: slog.New(slog.DiscardHandler)}, alerts: map[string]*instance{}, silences: newSilenceStore(),
		groups: map[string]*group{}, log: slog.New(slog.DiscardHandler), metrics: m, dirty: true}
	p.exec(withNow(context.Background(), now), newStep(nil))
	if !p.dirty || !p.saver.Failing() {
		t.Fatalf("dirty %v failing %v after a failed save", p.dirty, p.saver.Failing())
	}
	if got := counterValue(t, reg, "infergate_state_file_save_failures_total"); got != 1 {
		t.Errorf("save failures %v, want 1", got)
	}
	// The folder becomes writable.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	p.exec(withNow(context.Background(), now.Add(5*time.Second)), newStep(nil))
	if p.dirty || p.saver.Failing() {
		t.Fatalf("dirty %v failing %v after the folder came back", p.dirty, p.saver.Failing())
	}
	if _, err := os.Stat(p.file); err != nil {
		t.Fatal(err)
	}
}

// counterValue sums the samples of the counter name in g.
func counterValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestOutboxChangesSaveAtOnce: a notice owed, and one delivered, are
// saved at the next step, not after the usual five seconds, so a crash
// right after either loses or repeats nothing.
func TestOutboxChangesSaveAtOnce(t *testing.T) {
	now := newClock().now()
	file := filepath.Join(t.TempDir(), "state.json")
	o := &outbox{log: slog.New(slog.DiscardHandler)}
	p := &persistStage{file: file, outbox: o, alerts: map[string]*instance{}, silences: newSilenceStore(),
		groups: map[string]*group{}, log: o.log, lastSave: now.Add(-time.Second)}
	saved := func() int {
		b, err := os.ReadFile(file)
		if err != nil {
			return -1
		}
		var sf stateFile
		if err := json.Unmarshal(b, &sf); err != nil || sf.Outbox == nil {
			t.Fatalf("state file: %v", err)
		}
		return len(sf.Outbox.Entries)
	}
	o.owe("r", &notify.Message{GroupKey: "g", Status: notify.StatusFiring}, []string{"webhook"}, now, false)
	p.exec(withNow(context.Background(), now), newStep(nil))
	if n := saved(); n != 1 {
		t.Fatalf("after owing: %d entries saved, want 1 (saved before it is sent)", n)
	}
	e := o.unhanded()[0]
	o.settle(e.ID, "webhook", notify.Delivered)
	p.exec(withNow(context.Background(), now.Add(time.Second)), newStep(nil))
	if n := saved(); n != 0 {
		t.Errorf("one step after delivery: %d entries saved, want 0", n)
	}
}

// TestRestartKeepsTheValueThatFired: the value that fired, its time and
// the cause survive a restart; a state file written before they were
// kept still loads, and its alert's summary says the value was not kept
// instead of making one up.
func TestRestartKeepsTheValueThatFired(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "state.json")
	rule := summaryRule("HighP99", Condition{Kind: KindThreshold, Quantile: "p99", Window: 10 * time.Second, Value: "500ms"})
	mk := func() *Config { return &Config{Rules: []RuleConfig{rule}, StateFile: file} }
	r := newRig(t, mk())
	r.src.set("m", calls(6000, ms(10), ms(900), nil))
	r.run(5 * time.Second)
	r.src.set("m", calls(6000, ms(10), ms(300), nil))
	r.run(5 * time.Second)
	r.e.Close()

	summaryAfterRestart := func() string {
		t.Helper()
		r2 := newRig(t, mk())
		r2.c.t = r.c.t.Add(5 * time.Second)
		r2.src.set("m", calls(6000, ms(10), ms(300), nil))
		r2.run(time.Second)
		as := r2.e.Alerts()
		if len(as) != 1 || as[0].State != StateFiring {
			t.Fatalf("restored: %+v", as)
		}
		return as[0].Annotations["summary"]
	}
	if s, want := summaryAfterRestart(), "m: p99 900ms at 14:00:01, over its bound 500ms; now 300ms, recovering (resolves at 14:00:35 if it stays below)"; s != want {
		t.Errorf("after a restart: %q, want %q", s, want)
	}

	// The same file as an older infergate wrote it: no fired values.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var sf map[string]any
	if err := json.Unmarshal(b, &sf); err != nil {
		t.Fatal(err)
	}
	for _, a := range sf["alerts"].([]any) {
		delete(a.(map[string]any), "fired")
	}
	if b, err = json.Marshal(sf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, want := summaryAfterRestart(), "m: fired at 14:00:01 (its value was not kept across a restart); now p99 300ms, recovering (resolves at 14:00:35 if it stays below)"; s != want {
		t.Errorf("after a restart from an older file: %q, want %q", s, want)
	}
}
