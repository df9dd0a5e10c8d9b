package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/internal/statefile"
	"github.com/infergate/infergate/release"
)

const releaseYAML = `upstream: 127.0.0.1:1
releases:
  - model: resnet50
    stable: {version: "1"}
    candidate: {version: "2"}
    steps: [10, 50, 100]
    judgement: {step_time_limit: 30m}
`

// holds is a Lookup func of the (model, version) pairs a fake server holds.
func holds(pairs ...string) func(ctx context.Context, _ []namedConn, _ []release.Spec) (release.Lookup, error) {
	return func(context.Context, []namedConn, []release.Spec) (release.Lookup, error) {
		return release.Lookup{Model: func(m, v string) bool {
			for _, p := range pairs {
				if p == m+":"+v || (v == "" && strings.HasPrefix(p, m+":")) {
					return true
				}
			}
			return false
		}}, nil
	}
}

func releaseConfig(t *testing.T, yaml string, extra ...string) Config {
	t.Helper()
	cfg, err := parseConfig(append([]string{"--config", writeYAML(t, yaml)}, extra...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A bad release is refused before anything serves, with its field named
// as the file spells it; an upstream target must be a configured one.
func TestReleaseConfigErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"upstream: 127.0.0.1:1\nreleases: [{model: m, stable: {version: \"1\"}, candidate: {version: \"2\"}, steps: [50, 10]}]",
			"config: releases[0].steps: not increasing (10 after 50)"},
		{"upstream: 127.0.0.1:1\nreleases: [{model: m, stable: {version: \"1\"}, candidate: {version: \"2\"}, weight: 120}]",
			"config: releases[0].weight: must be between 0 and 100, got 120"},
		{"upstream: 127.0.0.1:1\nreleases: [{model: m, stable: {version: \"1\"}, candidate: {upstream: gpu-b}, weight: 5}]",
			`config: releases[0].candidate.upstream: no upstream is named "gpu-b"`},
		{"upstream: 127.0.0.1:1\nreleases: [{model: m, stable: {version: \"1\"}, candidate: {version: \"2\"}, weight: 5}, {model: m, stable: {version: \"1\"}, candidate: {version: \"3\"}, weight: 5}]",
			`config: releases[1].model: "m" is already released by releases[0]`},
	} {
		_, err := parseConfig([]string{"--config", writeYAML(t, c.yaml)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s", c.yaml, err, c.want)
		}
	}
	cfg := releaseConfig(t, releaseYAML)
	if st := cfg.Releases[0].Judgement.StepTimeLimit.String(); st != "30m0s" {
		t.Errorf("step_time_limit: 30m read as %s", st)
	}
}

// The release state file defaults to release-state.json beside the alert
// state file, and release_state_file wins.
func TestReleaseStateFileDefault(t *testing.T) {
	dir := t.TempDir()
	cfg := releaseConfig(t, releaseYAML, "--alert-state-file", filepath.Join(dir, "alerts.json"))
	if got, want := cfg.releaseStateFile(), filepath.Join(dir, "release-state.json"); got != want {
		t.Errorf("default release state file %q, want %q", got, want)
	}
	cfg = releaseConfig(t, releaseYAML+"release_state_file: /tmp/x.json\n")
	if got := cfg.releaseStateFile(); got != "/tmp/x.json" {
		t.Errorf("release_state_file: got %q", got)
	}
	cfg = releaseConfig(t, releaseYAML)
	if got := cfg.releaseStateFile(); got != "" {
		t.Errorf("no state file configured: got %q", got)
	}
}

// A reload whose release names a version the server does not hold is
// refused with the field named, and the releases in force stay; a good
// one is applied to the Set the proxy reads.
func TestReleaseReloadRefusesUnknownTarget(t *testing.T) {
	cfg := releaseConfig(t, releaseYAML)
	r, err := newReleasing(cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r.ask = holds("resnet50:1", "resnet50:2")
	t.Cleanup(r.stopCheck)
	step := releasesStep(r)

	bad := releaseConfig(t, strings.Replace(releaseYAML, `candidate: {version: "2"}`, `candidate: {version: "7"}`, 1))
	if _, _, err := step.prepare(&cfg, &bad); err == nil || !strings.Contains(err.Error(), `releases[0].candidate.version: model "resnet50" has no version "7" on the server`) {
		t.Fatalf("reload to an unknown version: %v; want refused naming releases[0].candidate.version", err)
	}
	if st := r.Status(); len(st) != 1 || st[0].Spec.Candidate.Version != "2" {
		t.Fatalf("after a refused reload: %+v; want the release in force kept", st)
	}

	good := releaseConfig(t, strings.Replace(releaseYAML, "steps: [10, 50, 100]", "steps: [5, 50, 100]", 1))
	commit, _, err := step.prepare(&cfg, &good)
	if err != nil || commit == nil {
		t.Fatalf("a good reload: %v", err)
	}
	commit()
	if st := r.Status(); len(st) != 1 || st[0].Weight != 5 || !strings.Contains(st[0].Reset, "started afresh") {
		t.Errorf("after the reload: %+v; want weight 5, the release started afresh and saying why", st)
	}
	// Unreachable servers: only the fields are checked, the reload goes on.
	r.ask = func(context.Context, []namedConn, []release.Spec) (release.Lookup, error) {
		return release.Lookup{}, errors.New("connection refused")
	}
	if _, _, err := step.prepare(&good, &bad); err != nil {
		t.Errorf("servers unreachable at a reload: %v; want the targets left unchecked", err)
	}
}

// At start the targets are checked once the servers answer: a release
// whose target they do not hold is removed, logged at ERROR and counted.
func TestReleaseRefusedOnceTheIndexAnswers(t *testing.T) {
	cfg := releaseConfig(t, releaseYAML)
	var logs bytes.Buffer
	r, err := newReleasing(cfg, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.refuseUnknown(cfg.Releases, release.Lookup{Model: func(m, v string) bool { return v == "1" }})
	if st := r.Status(); len(st) != 0 {
		t.Errorf("a release whose candidate the server lacks still runs: %+v", st)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "releases[0].candidate.version") {
		t.Errorf("log: %s; want an ERROR naming releases[0].candidate.version", logs.String())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.collector())
	if n := series(t, reg, "infergate_release_refused_total")[""]; n != 1 {
		t.Errorf("infergate_release_refused_total %v, want 1", n)
	}
}

// series returns each series of reg's family name as "label=value,...": value.
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[strings.Join(ls, ",")] = v
		}
	}
	return out
}

// A restart resumes a release at the step it reached, with its
// decisions, from the state file; a release whose spec changed meanwhile
// starts afresh and the log says why.
func TestReleaseStateSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := releaseConfig(t, releaseYAML, "--alert-state-file", filepath.Join(dir, "alerts.json"))
	log := slog.New(slog.DiscardHandler)
	fm := statefile.NewMetrics(nil)
	r, err := newReleasing(cfg, fm, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Act("resnet50", "promote", ""); err != nil {
		t.Fatal(err)
	}
	r.save()
	if _, err := os.Stat(filepath.Join(dir, "release-state.json")); err != nil {
		t.Fatalf("state file: %v", err)
	}

	again, err := newReleasing(cfg, fm, log)
	if err != nil {
		t.Fatal(err)
	}
	st := again.Status()[0]
	if st.Step != 1 || st.Weight != 50 || len(st.History) != 1 || st.History[0].Kind != release.Promote {
		t.Errorf("after a restart: step %d weight %g history %+v; want step 1, 50%%, the promotion", st.Step, st.Weight, st.History)
	}

	var logs bytes.Buffer
	changed := releaseConfig(t, strings.Replace(releaseYAML, `candidate: {version: "2"}`, `candidate: {version: "3"}`, 1),
		"--alert-state-file", filepath.Join(dir, "alerts.json"))
	fresh, err := newReleasing(changed, fm, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if st := fresh.Status()[0]; st.Step != 0 || !strings.Contains(logs.String(), "candidate version 2, now version 3") {
		t.Errorf("a changed release: step %d, log %s; want step 0 and the log saying what changed", st.Step, logs.String())
	}
}

// Operators' actions go through the Set; a rollback is logged once and
// counted, and the metrics read the release's weights, step and state.
func TestReleaseActionsAndMetrics(t *testing.T) {
	cfg := releaseConfig(t, releaseYAML)
	var logs bytes.Buffer
	r, err := newReleasing(cfg, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Act("resnet50", "jump", ""); err == nil || !strings.HasPrefix(err.Error(), "action: ") {
		t.Errorf("an unknown action: %v; want an error naming action", err)
	}
	if _, err := r.Act("bert", "pause", ""); !errors.Is(err, release.ErrNoRelease) {
		t.Errorf("a model without a release: %v", err)
	}
	if _, err := r.Act("resnet50", "rollback", "p99 doubled on the dashboard"); err != nil {
		t.Fatal(err)
	}
	if strings.Count(logs.String(), "release rolled back") != 1 {
		t.Errorf("log: %s; want one rollback line", logs.String())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.collector())
	dec := series(t, reg, "infergate_release_decisions_total")
	if dec["decision=rollback,model=resnet50"] != 1 || dec["decision=promote,model=resnet50"] != 0 || len(dec) != 3 {
		t.Errorf("infergate_release_decisions_total %v; want rollback 1, promote and hold 0", dec)
	}
	w := series(t, reg, "infergate_release_weight")
	if w["model=resnet50,target=candidate"] != 0 || w["model=resnet50,target=stable"] != 100 {
		t.Errorf("infergate_release_weight %v; want candidate 0, stable 100 after the rollback", w)
	}
	st := series(t, reg, "infergate_release_state")
	if len(st) != 5 || st["model=resnet50,state=rolled_back"] != 1 || st["model=resnet50,state=running"] != 0 {
		t.Errorf("infergate_release_state %v; want one series per state, rolled_back 1", st)
	}
}

// A release started through the admin API is checked as the file's are
// (a model already released is refused, an unknown target named), and
// outlives a reload that does not name its model.
func TestReleaseStartedThroughTheAPI(t *testing.T) {
	cfg := releaseConfig(t, releaseYAML)
	r, err := newReleasing(cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r.ask = holds("resnet50:1", "resnet50:2", "bert:1", "bert:2")
	t.Cleanup(r.stopCheck)
	ctx := context.Background()
	if err := r.Start(ctx, release.Spec{Model: "resnet50", Stable: release.Target{Version: "1"}, Candidate: release.Target{Version: "2"}, Weight: 5}); err == nil || !strings.HasPrefix(err.Error(), "model: ") {
		t.Errorf("a model already released: %v; want refused naming model", err)
	}
	if err := r.Start(ctx, release.Spec{Model: "bert", Stable: release.Target{Version: "1"}, Candidate: release.Target{Version: "9"}, Weight: 5}); err == nil || !strings.HasPrefix(err.Error(), "candidate.version: ") {
		t.Errorf("an unknown version: %v; want refused naming candidate.version", err)
	}
	if err := r.Start(ctx, release.Spec{Model: "bert", Stable: release.Target{Version: "1"}, Candidate: release.Target{Version: "2"}, Weight: 5}); err != nil {
		t.Fatal(err)
	}
	next := releaseConfig(t, strings.Replace(releaseYAML, "steps: [10, 50, 100]", "steps: [20, 100]", 1))
	commit, _, err := releasesStep(r).prepare(&cfg, &next)
	if err != nil {
		t.Fatal(err)
	}
	commit()
	if st := r.Status(); len(st) != 2 || st[0].Spec.Model != "bert" {
		t.Errorf("after a reload: %+v; want bert (started through the API) kept beside resnet50", st)
	}
}

// The alert engine hears of a rollback with its words until the release
// is removed, and of a removed release as not rolled back (its alert
// resolves at once).
func TestReleaseSourceForAlerts(t *testing.T) {
	cfg := releaseConfig(t, releaseYAML)
	r, err := newReleasing(cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stopCheck)
	if _, err := r.Act("resnet50", "rollback", "p99 doubled"); err != nil {
		t.Fatal(err)
	}
	rs := r.Releases()
	if len(rs) != 1 || !rs[0].RolledBack || !strings.Contains(rs[0].Reason, "p99 doubled") || !rs[0].Manual {
		t.Fatalf("after a rollback: %+v; want resnet50 rolled back with the reason", rs)
	}
	none := releaseConfig(t, "upstream: 127.0.0.1:1\n")
	commit, _, err := releasesStep(r).prepare(&cfg, &none)
	if err != nil {
		t.Fatal(err)
	}
	commit()
	if rs := r.Releases(); len(rs) != 1 || rs[0].Model != "resnet50" || rs[0].RolledBack {
		t.Errorf("after the release was removed: %+v; want resnet50 reported not rolled back", rs)
	}
}
