package alert

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// State is an alert's place in its lifecycle.
type State string

// The states of an active alert; an inactive one does not exist, and a
// resolved one is sent once and forgotten.
const (
	StatePending  State = "pending"
	StateFiring   State = "firing"
	StateResolved State = "resolved"
)

// Actuator carries out a rule's action for an alert's model while it
// fires; the proxy implements it (alert knows nothing of gRPC). Start and
// Stop are called from the evaluation loop and must not block for long;
// each returns what it did, for the alert's evidence and notification.
type Actuator interface {
	Start(action string, labels map[string]string) (string, error)
	Stop(action string, labels map[string]string) (string, error)
}

// Options configures an Engine. Config and Latency are required.
type Options struct {
	// Config is the validated alerting configuration.
	Config *Config
	// Latency is where recent per-model statistics come from.
	Latency LatencySource
	// Models returns the correlator's per-model states (GPU, hint); nil
	// means none.
	Models func() []correlate.ModelState
	// GPU returns the GPU state for per-GPU rules; nil means none.
	GPU func() gpu.State
	// Baselines is the shared baseline store; nil means an empty one
	// (baseline conditions stay unknown).
	Baselines *baseline.Store
	// Actuator carries out actions; nil means actions are only logged.
	Actuator Actuator
	// Send delivers a notification to a receiver; nil means the
	// receivers of Config, built with package notify.
	Send func(receiver string, m *notify.Message)
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the engine's metrics; nil means none.
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SliceLength is the monitor's slice length; 0 means 1s.
	SliceLength time.Duration
	// Tick, when set, drives Run instead of its own ticker: the monitor's
	// rotations (monitor.Registry.Rotations), so each evaluation reads a
	// slice the moment it completes.
	Tick <-chan time.Time
}

// instance is one alert: one rule for one model (or GPU).
type instance struct {
	rule        *Rule
	fp          string
	subject     string // model or GPU UUID
	labels      map[string]string
	state       State
	activeSince time.Time
	firedAt     time.Time
	lastTrue    time.Time
	lastDecided time.Time
	resolvedAt  time.Time
	escalated   bool
	value       string
	threshold   string
	annotations map[string]string
	evidence    Evidence
	actions     []string
	// acting is true while the rule's action is started.
	acting bool
}

// Evidence is why an alert is in its state.
type Evidence struct {
	Conditions []CondEvidence `json:"conditions"`
	GPU        *GPUEvidence   `json:"gpu,omitempty"`
	CauseHint  string         `json:"cause_hint,omitempty"`
	Baseline   *BaselineInfo  `json:"baseline,omitempty"`
	Actions    []string       `json:"actions,omitempty"`
}

// CondEvidence is one condition's last verdict.
type CondEvidence struct {
	Kind      string `json:"kind"`
	Holds     string `json:"holds"` // true, false, unknown
	Value     string `json:"value,omitempty"`
	Threshold string `json:"threshold,omitempty"`
	Calls     uint64 `json:"calls"`
	Note      string `json:"note,omitempty"`
}

// GPUEvidence is the state of the GPU an alert's model runs on.
type GPUEvidence struct {
	UUID        string   `json:"uuid"`
	Utilization float64  `json:"utilization"`
	MemoryRatio float64  `json:"memory_ratio,omitempty"`
	Temperature float64  `json:"temperature_celsius,omitempty"`
	Throttled   []string `json:"throttle_reasons,omitempty"`
}

// BaselineInfo is the model's baseline when the alert was evaluated.
type BaselineInfo struct {
	Source string             `json:"source"`
	Weeks  int                `json:"history_weeks"`
	Levels map[string]float64 `json:"median_seconds"`
	Spread map[string]float64 `json:"spread_seconds"`
	// UpAbove is the top of the band: the latency above which the
	// shared notion of "up" (baseline.DefaultRise) calls a quantile up.
	UpAbove map[string]float64 `json:"up_above_seconds"`
	Widen   float64            `json:"band_widen"`
}

// Engine evaluates rules every interval, keeps each alert's lifecycle and
// hands notifications to the dispatcher. Step and Run must not run
// concurrently; the read methods (Alerts, Rules, Silences) and the
// silence writes are safe for concurrent use.
type Engine struct {
	opts  Options
	cfg   *Config
	log   *slog.Logger
	start time.Time

	mu       sync.Mutex
	alerts   map[string]*instance
	trends   map[trendKey]*trendRing
	silences *silenceStore
	disp     *dispatcher
	lastEval time.Time
	evalTook time.Duration
	dirty    bool
	lastSave time.Time

	receivers map[string]*notify.Receiver
	metrics   *engineMetrics
}

// New returns an engine; call Run (or Step).
func New(opts Options) (*Engine, error) {
	if opts.Config == nil || opts.Latency == nil {
		return nil, fmt.Errorf("alert: Config and Latency are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SliceLength <= 0 {
		opts.SliceLength = time.Second
	}
	if opts.Baselines == nil {
		opts.Baselines = baseline.New(baseline.Options{Now: opts.Now})
	}
	e := &Engine{
		opts: opts, cfg: opts.Config, log: opts.Logger, start: opts.Now(),
		alerts: map[string]*instance{}, trends: map[trendKey]*trendRing{},
		silences: newSilenceStore(), metrics: newEngineMetrics(opts.Registerer),
	}
	inhibit := e.cfg.Inhibit
	if inhibit == nil {
		inhibit = DefaultInhibit()
	}
	send := opts.Send
	if send == nil {
		nm := notify.NewMetrics(opts.Registerer)
		e.receivers = map[string]*notify.Receiver{}
		cfgs := append([]notify.ReceiverConfig{{Name: LogReceiver, Log: true}}, e.cfg.Receivers...)
		for _, rc := range cfgs {
			r, err := notify.Build(rc, notify.WithLogger(opts.Logger), notify.WithMetrics(nm))
			if err != nil {
				return nil, fmt.Errorf("alert: receiver %q: %w", rc.Name, err)
			}
			e.receivers[rc.Name] = r
		}
		send = func(name string, m *notify.Message) {
			if r := e.receivers[name]; r != nil {
				r.Send(m)
			}
		}
	}
	e.disp = newDispatcher(e.cfg, inhibit, e.silences, send, e.log, e.metrics)
	if e.cfg.StateFile != "" {
		if err := e.loadState(e.cfg.StateFile); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Run evaluates every interval until ctx ends, then saves the state and
// stops the receivers (giving queued notifications a few seconds).
func (e *Engine) Run(ctx context.Context) {
	tick := e.opts.Tick
	if tick == nil {
		t := time.NewTicker(e.cfg.EvaluationInterval)
		defer t.Stop()
		tick = t.C
	}
	e.safeStep() // at once: a restart re-evaluates restored alerts without waiting
	for {
		select {
		case <-ctx.Done():
			e.Close()
			return
		case <-tick:
			e.safeStep()
		}
	}
}

// Close saves the state and drains the receivers.
func (e *Engine) Close() {
	e.mu.Lock()
	e.saveStateLocked()
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, r := range e.receivers {
		_ = r.Close(ctx)
	}
}

// safeStep is Step with a panic logged instead of ending the process: a
// bug in one evaluation (a rule, an actuator) must not take the proxy
// down with it; the next tick evaluates again.
func (e *Engine) safeStep() {
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("alert: evaluation panicked; evaluating again at the next tick", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	e.Step()
}

// Step evaluates every rule once at the engine's clock.
func (e *Engine) Step() {
	now := e.opts.Now()
	f := &frame{
		now: now, src: e.opts.Latency, slice: e.opts.SliceLength, cfg: e.cfg,
		recent: map[string]map[string]monitor.RecentStats{}, models: map[string]correlate.ModelState{},
		baselines: e.opts.Baselines,
	}
	if e.opts.Models != nil {
		for _, ms := range e.opts.Models() {
			f.models[ms.Model] = ms
		}
	}
	if e.opts.GPU != nil {
		f.gpus = e.opts.GPU()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.cfg.rules {
		if r.PerGPU {
			for _, d := range f.gpus.Devices {
				os := make([]outcome, len(r.conds))
				for i, cd := range r.conds {
					os[i] = gpuOutcome(d, cd)
				}
				e.advance(f, r, "gpu", d.UUID, os)
			}
			continue
		}
		for _, m := range f.subjects(r) {
			os := make([]outcome, len(r.conds))
			for i, cd := range r.conds {
				os[i] = e.evalModel(f, r, i, cd, m)
			}
			e.advance(f, r, "model", m, os)
		}
	}
	// Alerts nothing decided for a while (the model went quiet, or its
	// calls became too few to judge) resolve: an incident nobody can see
	// any more should not page forever.
	for _, a := range e.alerts {
		if a.state != StateResolved && now.Sub(a.lastDecided) > staleAfter(a.rule) {
			e.resolve(a, now, "no verdict for "+staleAfter(a.rule).String())
		}
	}
	e.forgetTrends(now)
	e.silences.expire(now, e.isFiring)
	e.disp.step(now, e.notifications(now))
	for fp, a := range e.alerts {
		if a.state == StateResolved {
			delete(e.alerts, fp)
		}
	}
	e.lastEval, e.evalTook = now, e.opts.Now().Sub(now)
	e.metrics.observe(e.cfg.rules, e.alerts, e.evalTook)
	if e.cfg.StateFile != "" && e.dirty && now.Sub(e.lastSave) >= 5*time.Second {
		e.saveStateLocked()
		e.lastSave = now
	}
}

// staleAfter is how long an alert keeps its state without any verdict.
func staleAfter(r *Rule) time.Duration { return max(5*time.Minute, r.For, r.KeepFiringFor) }

// advance moves one alert through its lifecycle given its conditions'
// outcomes.
func (e *Engine) advance(f *frame, r *Rule, subjectLabel, subject string, os []outcome) {
	holds := combine(r.compound, os)
	fp := fingerprint(r, subjectLabel, subject)
	a := e.alerts[fp]
	now := f.now
	if a == nil {
		if holds != yes {
			return
		}
		a = &instance{rule: r, fp: fp, subject: subject, state: StatePending, activeSince: now}
		e.alerts[fp] = a
		e.dirty = true
	}
	if a.labels == nil {
		a.labels = e.labels(f, a, subjectLabel)
	}
	e.fillEvidence(f, a, subjectLabel, os)
	if holds == unknown {
		return
	}
	a.lastDecided = now
	switch {
	case holds == yes:
		a.lastTrue = now
		if a.state == StatePending && now.Sub(a.activeSince) >= r.For {
			a.state, a.firedAt = StateFiring, now
			e.dirty = true
			e.log.Warn("alert firing", "alert", r.Name, subjectLabel, subject, "value", a.value, "threshold", a.threshold)
			e.act(a, true)
		}
	case a.state == StatePending:
		delete(e.alerts, fp)
		e.dirty = true
	case a.state == StateFiring && now.Sub(a.lastTrue) >= r.KeepFiringFor:
		e.resolve(a, now, "condition cleared")
	}
	if a.state == StateFiring && r.Escalate != nil && !a.escalated && now.Sub(a.firedAt) >= r.Escalate.After {
		a.escalated = true
		e.dirty = true
		e.log.Warn("alert escalated", "alert", r.Name, subjectLabel, subject, "severity", r.Escalate.Severity)
	}
	a.labels = e.labels(f, a, subjectLabel)
	a.annotations = e.render(a)
}

func (e *Engine) resolve(a *instance, now time.Time, why string) {
	if a.state == StatePending {
		delete(e.alerts, a.fp)
		return
	}
	a.state, a.resolvedAt = StateResolved, now
	e.dirty = true
	e.log.Info("alert resolved", "alert", a.rule.Name, "subject", a.subject, "why", why)
	e.act(a, false)
}

func (e *Engine) isFiring(fp string) bool {
	a := e.alerts[fp]
	return a != nil && a.state == StateFiring
}

// act starts or stops the rule's action and records what happened.
func (e *Engine) act(a *instance, on bool) {
	r := a.rule
	if r.Action == "" || a.acting == on {
		return
	}
	a.acting = on
	verb := map[bool]string{true: "start", false: "stop"}[on]
	var did string
	var err error
	switch {
	case e.opts.Actuator == nil:
		did = fmt.Sprintf("%s %s: no actuator in this build", verb, r.Action)
	case on:
		did, err = e.opts.Actuator.Start(r.Action, a.labels)
	default:
		did, err = e.opts.Actuator.Stop(r.Action, a.labels)
	}
	if err != nil {
		did = fmt.Sprintf("%s %s failed: %v", verb, r.Action, err)
		e.log.Error("alert action failed", "alert", r.Name, "subject", a.subject, "action", r.Action, "err", err)
	} else {
		e.log.Warn("alert action", "alert", r.Name, "subject", a.subject, "action", r.Action, "did", did)
	}
	a.actions = append(a.actions, did)
	if len(a.actions) > 10 {
		a.actions = a.actions[len(a.actions)-10:]
	}
	// The evidence was filled before the state changed: show the action
	// now, not one evaluation later.
	a.evidence.Actions = a.actions
}

// fingerprint identifies an alert: rule, subject and the rule's own
// labels (not severity, which escalation changes).
func fingerprint(r *Rule, subjectLabel, subject string) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s=%s", r.Name, subjectLabel, subject)
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		fmt.Fprintf(h, "\x00%s=%s", k, r.Labels[k])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// labels returns an alert's label set.
func (e *Engine) labels(f *frame, a *instance, subjectLabel string) map[string]string {
	l := map[string]string{"alertname": a.rule.Name, "severity": a.rule.Severity, subjectLabel: a.subject}
	maps.Copy(l, a.rule.Labels)
	if a.escalated {
		l["severity"] = a.rule.Escalate.Severity
		l["escalated"] = "true"
	}
	if subjectLabel == "model" {
		if ms, ok := f.models[a.subject]; ok && ms.GPUUUID != "" {
			l["gpu"] = ms.GPUUUID
		} else if old := a.labels["gpu"]; old != "" {
			l["gpu"] = old
		}
	}
	return l
}

// fillEvidence records the outcomes and context of the last evaluation.
func (e *Engine) fillEvidence(f *frame, a *instance, subjectLabel string, os []outcome) {
	ev := Evidence{Actions: a.actions}
	for i, o := range os {
		ce := CondEvidence{Kind: a.rule.conds[i].kind, Holds: o.holds.String(), Calls: o.calls, Note: o.note}
		if o.holds != unknown || o.value != 0 {
			ce.Value, ce.Threshold = o.fmt(o.value), o.fmt(o.threshold)
		}
		ev.Conditions = append(ev.Conditions, ce)
	}
	if len(os) > 0 && os[0].holds != unknown {
		a.value, a.threshold = os[0].fmt(os[0].value), os[0].fmt(os[0].threshold)
	}
	if subjectLabel == "model" {
		if ms, ok := f.models[a.subject]; ok {
			ev.CauseHint = ms.Hint
			if ms.GPU != nil {
				ev.GPU = gpuEvidence(*ms.GPU)
			}
		}
		if b := f.baselines.Get(a.subject); b.Known() {
			bi := &BaselineInfo{Source: b.Source, Weeks: b.Weeks, Widen: b.Widen,
				Levels: map[string]float64{}, Spread: map[string]float64{}, UpAbove: map[string]float64{}}
			for q, n := range baseline.QuantileNames {
				bi.Levels[n], bi.Spread[n] = b.Q[q].Median, b.Q[q].Spread
				th, _ := b.Threshold(q, baseline.DefaultRise)
				bi.UpAbove[n] = th.Seconds()
			}
			ev.Baseline = bi
		}
	} else if d, ok := f.gpus.Device(a.subject); ok {
		ev.GPU = gpuEvidence(d)
	}
	a.evidence = ev
}

func gpuEvidence(d gpu.Device) *GPUEvidence {
	g := &GPUEvidence{UUID: d.UUID, Utilization: d.Utilization, Temperature: d.TemperatureCelsius, Throttled: d.ActiveReasons()}
	g.MemoryRatio, _ = d.MemoryRatio()
	return g
}

// templateData is what annotation templates see.
type templateData struct {
	Labels    map[string]string
	Value     string
	Threshold string
	Evidence  string
}

func (e *Engine) render(a *instance) map[string]string {
	out := map[string]string{}
	data := templateData{Labels: a.labels, Value: a.value, Threshold: a.threshold, Evidence: a.evidence.String()}
	for k, t := range a.rule.ann {
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			out[k] = fmt.Sprintf("(template error: %v)", err)
			continue
		}
		out[k] = b.String()
	}
	return out
}

// String is the evidence on one line.
func (ev Evidence) String() string {
	var parts []string
	for _, c := range ev.Conditions {
		s := c.Kind + " " + c.Holds
		if c.Value != "" {
			s += fmt.Sprintf(": %s vs %s", c.Value, c.Threshold)
		}
		if c.Calls > 0 {
			s += fmt.Sprintf(" over %d calls", c.Calls)
		}
		if c.Note != "" {
			s += " (" + c.Note + ")"
		}
		parts = append(parts, s)
	}
	if ev.GPU != nil {
		parts = append(parts, fmt.Sprintf("GPU %s %.0f%% busy", ev.GPU.UUID, 100*ev.GPU.Utilization))
	}
	if ev.CauseHint != "" && ev.CauseHint != correlate.HintNone {
		parts = append(parts, "cause hint "+ev.CauseHint)
	}
	return strings.Join(parts, "; ")
}

// notifications returns the alerts the dispatcher should consider: firing
// and just-resolved ones.
func (e *Engine) notifications(now time.Time) []notify.Alert {
	var out []notify.Alert
	for _, a := range e.alerts {
		if a.state == StatePending {
			continue
		}
		na := notify.Alert{
			Name: a.rule.Name, Status: notify.StatusFiring, Severity: a.labels["severity"],
			Labels: a.labels, Annotations: a.annotations, StartsAt: a.firedAt, Fingerprint: a.fp,
			Evidence: a.evidence.String(), Actions: slices.Clone(a.actions),
			GeneratorURL: strings.TrimSuffix(e.cfg.ExternalURL, "/") + "/api/v1/alerts",
		}
		if a.state == StateResolved {
			na.Status, na.EndsAt = notify.StatusResolved, a.resolvedAt
		}
		out = append(out, na)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Fingerprint < out[j].Fingerprint })
	return out
}
