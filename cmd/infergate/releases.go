package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/internal/statefile"
	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/proxy/route"
	"github.com/infergate/infergate/release"
)

// Releases (issue 46, docs/releases.md): the release.Set is built here
// from the releases: section and handed to the proxy (proxy.WithReleases),
// which reads the same Set, so an Apply at a reload or a start through
// the admin API reaches the calls at once. This file keeps what the Set
// leaves to its caller: checking targets against the model servers, the
// judgement's tick, its log lines and metrics, and the state file.

// releaseStateKind labels the release state file in the state-file
// metrics.
const releaseStateKind = "release_state"

// defaultReleaseStateName is the release state file's name beside the
// alert state file, when release_state_file is not set.
const defaultReleaseStateName = "release-state.json"

// releaseProblems checks the releases: section without asking any server:
// every field of every release, and that an upstream target names a
// configured upstream. Whether a version or a model exists is asked of
// the servers later (checkReleaseTargets, releasing.recheck).
func (c *Config) releaseProblems() []error {
	var errs []error
	for _, e := range release.Problems(c.Releases, release.Lookup{Upstream: c.upstreamNamed()}) {
		errs = append(errs, fmt.Errorf("config: %v", e))
	}
	return errs
}

// upstreamNamed reports whether an upstream of that name is configured;
// nil (not checked) when the routing section itself is bad.
func (c *Config) upstreamNamed() func(string) bool {
	if c.routes == nil {
		return nil
	}
	return func(name string) bool {
		return slices.ContainsFunc(c.routes.Upstreams, func(u route.PlannedUpstream) bool { return u.Name == name })
	}
}

// releaseStateFile is where the releases' state is kept: release_state_file,
// else release-state.json beside the alert state file, else nowhere.
func (c *Config) releaseStateFile() string {
	if c.ReleaseStateFile != "" {
		return c.ReleaseStateFile
	}
	if c.alerts != nil && c.alerts.StateFile != "" {
		return filepath.Join(filepath.Dir(c.alerts.StateFile), defaultReleaseStateName)
	}
	return ""
}

// judgeInterval is how often the releases are judged: the Set's
// decisions are valid however often they are read, so a second is
// about as soon as a rollback can help.
const judgeInterval = time.Second

// saveInterval is how often the release state is saved when nothing was
// decided: the evidence grows with every call, and a restart should lose
// at most this much of it.
const saveInterval = 10 * time.Second

// targetRetry is how often the servers are asked again for the targets
// of the releases in force, until they answer once.
const targetRetry = 30 * time.Second

// releasing is the running releases: the Set, what was started through
// the admin API, the judgement's tick, its metrics and the state file.
type releasing struct {
	set   *release.Set
	log   *slog.Logger
	saver *statefile.Saver // nil without a state file
	// ask looks up which targets the model servers of conns hold (their
	// repository index, askTargets); nil asks nothing (tests, docs).
	ask func(ctx context.Context, conns []namedConn, specs []release.Spec) (release.Lookup, error)
	// upstreamConns lists the upstreams in force; called where they
	// cannot change meanwhile (the start, a reload's commit).
	upstreamConns func() []namedConn
	// upstreams reports a configured upstream's name (the configuration
	// in force).
	upstreams func(string) bool
	now       func() time.Time

	mu sync.Mutex
	// config are the releases of the configuration in force; started
	// those started through the admin API for models the configuration
	// does not name (they last until a restart, or until a reload's
	// releases: names their model).
	config, started []release.Spec
	// conns are the upstreams asked about targets.
	conns []namedConn
	// decisions counts decisions by model and kind, for
	// infergate_release_decisions_total.
	decisions map[string]map[string]uint64
	refused   uint64
	// gone are the models whose release a reload or a refusal removed,
	// and when: the alert engine hears of them as not rolled back for
	// goneFor, so a version_regression alert of a removed release
	// resolves at once rather than going stale.
	gone   map[string]time.Time
	dirty  bool
	cancel context.CancelFunc // the target check of the releases in force
}

// newReleasing builds the Set of cfg's releases and restores its state
// file. A state file that cannot be read or used is set aside, logged and
// counted, and the releases start afresh: a release must never keep the
// proxy from serving.
func newReleasing(cfg Config, fm *statefile.Metrics, log *slog.Logger) (*releasing, error) {
	r := &releasing{log: log, now: time.Now, decisions: map[string]map[string]uint64{}, upstreams: cfg.upstreamNamed()}
	set, err := release.New(cfg.Releases, release.WithRollback(r.rolledBack), release.WithClassNames(proxy.RowsClassName))
	if err != nil {
		return nil, err // validate checked them: not expected
	}
	r.set = set
	r.config = slices.Clone(cfg.Releases)
	for _, s := range cfg.Releases {
		r.count(s.Model, "")
	}
	if f := cfg.releaseStateFile(); f != "" {
		fm.Init(releaseStateKind)
		r.saver = &statefile.Saver{Path: f, Kind: releaseStateKind, Retry: "at the next save", Log: log, Metrics: fm}
		r.restore(f, fm)
	}
	return r, nil
}

// restore loads the state file into the Set, and says which releases
// resumed and which started afresh (and why).
func (r *releasing) restore(f string, fm *statefile.Metrics) {
	b, err := statefile.Read(f, release.MaxStateBytes)
	if err == nil {
		err = r.set.Restore(b)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		aside, aerr := statefile.SetAside(f, r.now())
		fm.Damaged(releaseStateKind)
		r.log.Error("release state file unusable; the releases start afresh", "file", f, "err", err, "set_aside_as", aside, "set_aside_err", aerr)
		return
	}
	for _, st := range r.set.Status() {
		if st.Reset != "" {
			r.log.Warn("release: "+st.Reset, "model", st.Spec.Model)
			continue
		}
		r.log.Info("release resumed from the state file", "model", st.Spec.Model, "state", st.State.String(),
			"weight", st.Weight, "step", st.Step, "decisions", len(st.History))
	}
}

// rolledBack is the Set's rollback hook: every rollback, the
// judgement's, an operator's, or the proxy's when the candidate is gone
// (NOT_FOUND), is logged and counted here, once. The alert engine reads
// the rollback from Status (releaseSource).
func (r *releasing) rolledBack(d release.Decision) {
	r.log.Warn("release rolled back: "+d.Reason, "model", d.Model, "from", d.From, "manual", d.Manual)
	r.mu.Lock()
	r.count(d.Model, d.Kind.String())
	r.dirty = true
	r.mu.Unlock()
}

// count adds one decision of kind for model ("" makes the model's series
// exist at 0). Called with r.mu held, or before r is shared.
func (r *releasing) count(model, kind string) {
	m := r.decisions[model]
	if m == nil {
		m = map[string]uint64{"promote": 0, "rollback": 0, "hold": 0}
		r.decisions[model] = m
	}
	if kind != "" {
		m[kind]++
	}
}

// decided logs and counts the decisions of a tick or an operator's
// promotion (rollbacks are the hook's).
func (r *releasing) decided(ds []release.Decision) {
	if len(ds) == 0 {
		return
	}
	r.mu.Lock()
	for _, d := range ds {
		if d.Kind != release.Rollback {
			r.count(d.Model, d.Kind.String())
		}
	}
	r.dirty = true
	r.mu.Unlock()
	for _, d := range ds {
		switch d.Kind {
		case release.Promote:
			r.log.Info("release promoted: "+d.Reason, "model", d.Model, "from", d.From, "to", d.To, "manual", d.Manual)
		case release.Hold:
			r.log.Warn("release held for an operator: "+d.Reason, "model", d.Model, "weight", d.From)
		}
	}
}

// run judges every release each judgeInterval until ctx ends, and saves
// the state after every decision, every saveInterval, and at the end.
func (r *releasing) run(ctx context.Context) {
	t := time.NewTicker(judgeInterval)
	defer t.Stop()
	lastSave := r.now()
	for {
		select {
		case <-ctx.Done():
			r.save()
			return
		case <-t.C:
		}
		now := r.now()
		r.decided(r.set.Judge(now))
		r.mu.Lock()
		dirty := r.dirty
		r.mu.Unlock()
		if dirty || now.Sub(lastSave) >= saveInterval {
			r.save()
			lastSave = now
		}
	}
}

// save writes the Set's state to the state file; a failed save leaves it
// dirty, to be tried at the next tick.
func (r *releasing) save() {
	if r.saver == nil {
		return
	}
	b, err := r.set.Snapshot(r.now().Round(0))
	if err == nil {
		err = r.saver.Write(func(w io.Writer) error { _, err := w.Write(b); return err })
	}
	r.mu.Lock()
	r.dirty = err != nil
	r.mu.Unlock()
}

// Status is the admin API's view.
func (r *releasing) Status() []release.Status { return r.set.Status() }

// Act runs an operator's action on model's release: pause, resume,
// promote or rollback (reason goes into a rollback's words).
func (r *releasing) Act(model, action, reason string) (release.Decision, error) {
	var d release.Decision
	var err error
	switch action {
	case "pause":
		err = r.set.Pause(model)
	case "resume":
		err = r.set.Resume(model)
	case "promote":
		if d, err = r.set.Promote(model); err == nil {
			r.decided([]release.Decision{d})
		}
	case "rollback":
		d, err = r.set.Rollback(model, reason) // logged and counted by the hook
	default:
		return d, fmt.Errorf("action: must be start, pause, resume, promote or rollback, got %q", action)
	}
	if err == nil {
		r.log.Info("release: "+action+" by an operator", "model", model, "reason", reason)
		r.mu.Lock()
		r.dirty = true
		r.mu.Unlock()
	}
	return d, err
}

// Start starts spec through the admin API, checked as the configuration's
// releases are: its fields, a model no other release splits, and its
// targets against the servers (when they answer within a few seconds).
// Errors name the field relative to the release ("candidate.version: ...").
func (r *releasing) Start(ctx context.Context, spec release.Spec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := append(slices.Clone(r.config), r.started...)
	if slices.ContainsFunc(all, func(s release.Spec) bool { return s.Model == spec.Model && spec.Model != "" }) {
		return fmt.Errorf("model: %q already has a release (change it in the configuration, or roll it back and reload)", spec.Model)
	}
	known := release.Lookup{Upstream: r.upstreams}
	if r.ask != nil {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lk, err := r.ask(actx, r.conns, []release.Spec{spec})
		cancel()
		if err != nil {
			return fmt.Errorf("candidate: the model servers could not be asked whether they hold the targets: %v", err)
		}
		known.Model = lk.Model
	}
	if errs := release.Problems([]release.Spec{spec}, known); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = strings.TrimPrefix(e.Error(), "releases[0].")
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	started := append(slices.Clone(r.started), spec)
	if err := r.set.Apply(append(slices.Clone(r.config), started...)); err != nil {
		return err // checked above: not expected
	}
	r.started = started
	r.count(spec.Model, "")
	r.dirty = true
	r.log.Info("release started by an operator", "model", spec.Model, "stable", spec.Stable.String(), "candidate", spec.Candidate.String())
	return nil
}

// stage checks the releases of a new configuration (a reload) against
// the servers and returns the specs to apply: the configuration's, and
// those started through the admin API for models it does not name. When
// the servers cannot be asked, only the fields are checked, and the log
// says so.
func (r *releasing) stage(ctx context.Context, next *Config) ([]release.Spec, error) {
	known := release.Lookup{Upstream: next.upstreamNamed()}
	r.mu.Lock()
	conns := r.conns
	r.mu.Unlock()
	if r.ask != nil && len(next.Releases) > 0 {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lk, err := r.ask(actx, conns, next.Releases)
		cancel()
		if err != nil {
			r.log.Warn("reload: the releases' targets were not checked against the model servers' repository (they did not answer)", "err", err)
		} else {
			known.Model = lk.Model
		}
	}
	if errs := release.Problems(next.Releases, known); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	specs := slices.Clone(next.Releases)
	for _, s := range r.started {
		if !slices.ContainsFunc(next.Releases, func(c release.Spec) bool { return c.Model == s.Model }) {
			specs = append(specs, s)
		}
	}
	return specs, nil
}

// apply makes specs the releases in force (the commit of a reload).
func (r *releasing) apply(next *Config, specs []release.Spec) error {
	if err := r.set.Apply(specs); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.config = slices.Clone(next.Releases)
	r.started = slices.DeleteFunc(slices.Clone(r.started), func(s release.Spec) bool {
		return slices.ContainsFunc(next.Releases, func(c release.Spec) bool { return c.Model == s.Model })
	})
	r.upstreams = next.upstreamNamed()
	if r.upstreamConns != nil {
		r.conns = r.upstreamConns()
	}
	for _, s := range specs {
		r.count(s.Model, "")
	}
	for m := range r.decisions {
		if !slices.ContainsFunc(specs, func(s release.Spec) bool { return s.Model == m }) {
			delete(r.decisions, m) // a removed release's series go with it
			r.forget(m)
		}
	}
	r.dirty = true
	return nil
}

// recheck asks the servers for the targets of the releases in force
// until they answer once (again every targetRetry), then refuses each
// release whose target they do not hold: it is logged at ERROR, counted
// in infergate_release_refused_total and removed from the Set. The start
// cannot wait for the servers (the proxy must serve without them), and
// a release sent to a target that does not exist would fail its calls.
func (r *releasing) recheck() {
	r.mu.Lock()
	if r.cancel != nil {
		r.cancel()
	}
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(context.Background())
	specs := append(slices.Clone(r.config), r.started...)
	if r.conns == nil && r.upstreamConns != nil {
		r.conns = r.upstreamConns()
	}
	conns := r.conns
	// The check asks with the asker of now: the goroutine reads nothing
	// of r that a later reload may change.
	ask := r.ask
	r.mu.Unlock()
	if ask == nil || len(specs) == 0 {
		return
	}
	go func() {
		t := time.NewTicker(targetRetry)
		defer t.Stop()
		for {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			lk, err := ask(actx, conns, specs)
			cancel()
			if err == nil {
				r.refuseUnknown(specs, lk)
				return
			}
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("releases: the model servers do not answer yet; the releases' targets are not checked", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stopCheck ends the target check in progress, if any.
func (r *releasing) stopCheck() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		r.cancel()
	}
}

// refuseUnknown removes from the Set each release of specs whose targets
// lk does not hold.
func (r *releasing) refuseUnknown(specs []release.Spec, lk release.Lookup) {
	var keep []release.Spec
	var refused []string
	for i, s := range specs {
		errs := release.Problems([]release.Spec{s}, release.Lookup{Model: lk.Model})
		if len(errs) == 0 {
			keep = append(keep, s)
			continue
		}
		refused = append(refused, s.Model)
		for _, e := range errs {
			r.log.Error("release REFUSED: its target is unknown to the model server; the model's calls go to their usual target",
				"model", s.Model, "problem", strings.Replace(e.Error(), "releases[0].", fmt.Sprintf("releases[%d].", i), 1))
		}
	}
	if len(refused) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.set.Apply(keep); err != nil {
		r.log.Error("releases: removing the refused releases failed", "err", err)
		return
	}
	gone := func(s release.Spec) bool { return slices.Contains(refused, s.Model) }
	r.config = slices.DeleteFunc(r.config, gone)
	r.started = slices.DeleteFunc(r.started, gone)
	for _, m := range refused {
		delete(r.decisions, m)
		r.forget(m)
	}
	r.refused += uint64(len(refused))
	r.dirty = true
}

// goneFor is how long a removed release is reported to the alert engine
// as not rolled back: a few evaluations are enough to resolve its alert.
const goneFor = 10 * time.Minute

// forget notes that model's release was removed (called with r.mu held).
func (r *releasing) forget(model string) {
	if r.gone == nil {
		r.gone = map[string]time.Time{}
	}
	r.gone[model] = r.now()
}

// Releases tells the alert engine's version_regression condition where
// each release stands (alert.ReleaseSource): a rolled-back release with
// its rollback decision in words, until it is restarted or removed.
func (r *releasing) Releases() []alert.ReleaseState {
	var out []alert.ReleaseState
	have := map[string]bool{}
	for _, st := range r.set.Status() {
		rs := alert.ReleaseState{Model: st.Spec.Model, RolledBack: st.State == release.RolledBack}
		if rs.RolledBack {
			for i := len(st.History) - 1; i >= 0; i-- {
				if d := st.History[i]; d.Kind == release.Rollback {
					rs.Reason, rs.At, rs.Manual = d.Reason, d.At, d.Manual
					break
				}
			}
		}
		have[rs.Model] = true
		out = append(out, rs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for m, at := range r.gone {
		switch {
		case now.Sub(at) > goneFor:
			delete(r.gone, m)
		case !have[m]:
			out = append(out, alert.ReleaseState{Model: m})
		}
	}
	return out
}

// releasesStep applies the releases: section at a reload. A release
// whose fields or targets are bad refuses the whole reload; the releases
// in force stay.
func releasesStep(r *releasing) reloadStep {
	return reloadStep{name: "releases", prepare: func(old, next *Config) (func() string, func(), error) {
		if r == nil || reflect.DeepEqual(old.Releases, next.Releases) {
			return nil, nil, nil
		}
		specs, err := r.stage(context.Background(), next)
		if err != nil {
			return nil, nil, err
		}
		return func() string {
			if err := r.apply(next, specs); err != nil { // checked above: not expected
				return "releases not applied: " + err.Error()
			}
			r.recheck()
			return fmt.Sprintf("releases (%d)", len(specs))
		}, nil, nil
	}}
}

// collector exports the releases from Status, at each scrape.
func (r *releasing) collector() prometheus.Collector { return releaseCollector{r} }

var (
	releaseWeightDesc = prometheus.NewDesc("infergate_release_weight",
		"A release's share of its model's calls by target (stable, candidate), in percent.", []string{"model", "target"}, nil)
	releaseStepDesc = prometheus.NewDesc("infergate_release_step",
		"The step a release is at: its index in steps (0 the first), -1 for a release without steps.", []string{"model"}, nil)
	releaseStateDesc = prometheus.NewDesc("infergate_release_state",
		"1 for the state a release is in (running, paused, held, rolled_back, promoted), 0 for the others.", []string{"model", "state"}, nil)
	releaseInfoDesc = prometheus.NewDesc("infergate_release_info",
		"1 per release, naming its stable and candidate targets (\"version 1\", \"model resnet50-trt\", \"upstream gpu-b\").", []string{"model", "stable", "candidate"}, nil)
	releaseDecisionsDesc = prometheus.NewDesc("infergate_release_decisions_total",
		"Decisions that changed a release, by decision: promote (the next step), rollback (the candidate's weight to 0), hold (a step out of time, waiting for an operator).",
		[]string{"model", "decision"}, nil)
	releaseCandidateCallsDesc = prometheus.NewDesc("infergate_release_step_candidate_calls",
		"The candidate's answered calls in the release's current step, as of the last judgement (the evidence a promotion needs).", []string{"model"}, nil)
	releaseRefusedDesc = prometheus.NewDesc("infergate_release_refused_total",
		"Releases refused after the start because the model server does not hold a target they name (logged at ERROR).", nil, nil)
)

type releaseCollector struct{ r *releasing }

func (c releaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{releaseWeightDesc, releaseStepDesc, releaseStateDesc, releaseInfoDesc,
		releaseDecisionsDesc, releaseCandidateCallsDesc, releaseRefusedDesc} {
		ch <- d
	}
}

var releaseStates = []release.State{release.Running, release.Paused, release.Held, release.RolledBack, release.Promoted}

func (c releaseCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.r.set.Status() {
		m := st.Spec.Model
		ch <- prometheus.MustNewConstMetric(releaseWeightDesc, prometheus.GaugeValue, 100-st.Weight, m, "stable")
		ch <- prometheus.MustNewConstMetric(releaseWeightDesc, prometheus.GaugeValue, st.Weight, m, "candidate")
		ch <- prometheus.MustNewConstMetric(releaseStepDesc, prometheus.GaugeValue, float64(st.Step), m)
		for _, s := range releaseStates {
			v := 0.0
			if st.State == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(releaseStateDesc, prometheus.GaugeValue, v, m, s.String())
		}
		ch <- prometheus.MustNewConstMetric(releaseInfoDesc, prometheus.GaugeValue, 1, m, st.Spec.Stable.String(), st.Spec.Candidate.String())
		var calls uint64
		for _, cl := range st.Evidence.Classes {
			calls += cl.Calls[release.Candidate]
		}
		ch <- prometheus.MustNewConstMetric(releaseCandidateCallsDesc, prometheus.GaugeValue, float64(calls), m)
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	for _, m := range slices.Sorted(maps.Keys(c.r.decisions)) {
		for _, k := range []string{"promote", "rollback", "hold"} {
			ch <- prometheus.MustNewConstMetric(releaseDecisionsDesc, prometheus.CounterValue, float64(c.r.decisions[m][k]), m, k)
		}
	}
	ch <- prometheus.MustNewConstMetric(releaseRefusedDesc, prometheus.CounterValue, float64(c.r.refused))
}
