package alert

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/internal/statefile"
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
	// Releases tells the version_regression condition where each
	// model's release stands; nil means none (it never holds).
	Releases ReleaseSource
	// Actuator carries out actions; nil means actions are only logged.
	Actuator Actuator
	// Send delivers a notification to a receiver; nil means the
	// receivers of Config, built with package notify.
	Send func(receiver string, m *notify.Message)
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the engine's metrics; nil means none.
	Registerer prometheus.Registerer
	// FileMetrics counts damaged state files and failed saves; nil
	// means uncounted.
	FileMetrics *statefile.Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SliceLength is the monitor's slice length; 0 means 1s.
	SliceLength time.Duration
	// Tick, when set, drives Run instead of its own ticker: the monitor's
	// rotations (monitor.Registry.Rotations), so each evaluation reads a
	// slice the moment it completes.
	Tick <-chan time.Time
}

// Engine evaluates rules every interval and runs each evaluation's
// verdicts through its stages: evaluate, lifecycle and actions, mute
// (inhibition, then silences), route and group, flush, persist (stage.go).
// It keeps the loop, the lock and the API. Step and Run must not run
// concurrently; the read methods (Alerts, Rules, Silences) and the
// silence writes are safe for concurrent use.
type Engine struct {
	opts Options
	cfg  *Config
	log  *slog.Logger

	mu       sync.Mutex
	alerts   map[string]*instance
	trends   *trendStore
	silences *silenceStore
	groups   map[string]*group
	outbox   *outbox
	// muted says why each alert was muted at the last step, for the API.
	muted     map[string]string
	lifecycle *lifecycleStage
	persist   *persistStage
	pipeline  stages
	lastEval  time.Time
	evalTook  time.Duration
	// anomaly scores every model's seconds for the anomaly rule kind,
	// the API and /metrics (anomaly_feed.go).
	anomaly *anomalyFeed

	receivers map[string]*notify.Receiver
	metrics   *engineMetrics
	// notifyMetrics are the receivers' metrics, registered once and
	// shared by the receivers of every configuration Apply installs.
	notifyMetrics *notify.Metrics
	// owe, resend and deliver are the notification stages' hooks into
	// the outbox and the receivers; they read e.receivers when called.
	owe     func(receiver string, m *notify.Message, only []string, resend bool)
	resend  func(receiver string) (time.Duration, []string)
	deliver func(o *owed)
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
		opts: opts, cfg: opts.Config, log: opts.Logger,
		alerts: map[string]*instance{}, trends: newTrendStore(opts.Now()),
		silences: newSilenceStore(), groups: map[string]*group{}, muted: map[string]string{}, outbox: &outbox{log: opts.Logger},
		metrics: newEngineMetrics(opts.Registerer), anomaly: newAnomalyFeed(),
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(anomalyCollector{e.anomaly})
	}
	// deliver hands one owed notice to its receiver; the senders report
	// each integration's outcome to the outbox.
	deliver := func(o *owed) {
		if opts.Send != nil { // a test's stand-in: delivered on the spot
			opts.Send(o.Receiver, o.Message)
			for _, n := range o.Pending {
				e.outbox.settle(o.ID, n, notify.Delivered)
			}
			return
		}
		r := e.receivers[o.Receiver]
		if r == nil { // restored for a receiver no longer configured
			e.log.Warn("alert notification given up: no such receiver", "receiver", o.Receiver, "group", o.Message.GroupKey)
			for _, n := range o.Pending {
				e.outbox.settle(o.ID, n, notify.GivenUp)
			}
			return
		}
		r.SendTracked(o.Message, o.Created, o.Pending, func(integration string, oc notify.Outcome) {
			e.outbox.settle(o.ID, integration, oc)
		})
	}
	if opts.Send == nil {
		e.notifyMetrics = notify.NewMetrics(opts.Registerer)
		rs, err := e.buildReceivers(e.cfg)
		if err != nil {
			return nil, err
		}
		e.receivers = rs
	}
	owe := func(receiver string, m *notify.Message, only []string, resend bool) {
		pending := only
		switch {
		case opts.Send != nil:
			pending = []string{"send"}
		case pending == nil:
			r := e.receivers[receiver]
			if r == nil {
				return
			}
			pending = r.Integrations()
		}
		e.outbox.owe(receiver, m, pending, e.opts.Now(), resend)
	}
	resend := func(receiver string) (time.Duration, []string) {
		if r := e.receivers[receiver]; r != nil {
			return r.Resend()
		}
		return 0, nil
	}
	e.owe, e.resend, e.deliver = owe, resend, deliver
	e.lifecycle = &lifecycleStage{cfg: e.cfg, alerts: e.alerts, silences: e.silences, actuator: opts.Actuator, log: e.log,
		started: opts.Now()}
	e.persist = &persistStage{file: e.cfg.StateFile, alerts: e.alerts, silences: e.silences, groups: e.groups, outbox: e.outbox,
		log: e.log, metrics: opts.FileMetrics}
	e.pipeline = e.stagesFor(e.cfg)
	if e.cfg.StateFile != "" {
		e.persist.load(e.cfg.rules, e.lifecycle, opts.Now())
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

// StateReset says why the engine started without its state file, or nil
// when it did not.
func (e *Engine) StateReset() *StateReset {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.persist.reset
}

// Close drains the receivers (a few seconds), then saves the state: what
// was delivered leaves the outbox, what was not stays owed for the next
// start.
func (e *Engine) Close() {
	e.closeReceivers()
	e.mu.Lock()
	e.persist.save(e.opts.Now())
	e.mu.Unlock()
}

// closeReceivers stops the receivers, giving queued notifications a few
// seconds.
func (e *Engine) closeReceivers() {
	e.mu.Lock()
	rs := e.receivers
	e.mu.Unlock()
	closeAll(rs)
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

// Step evaluates every rule once at the engine's clock: it reads the
// data (outside the lock), then runs the stages at that instant.
func (e *Engine) Step() {
	now := e.opts.Now()
	e.mu.Lock()
	cfg := e.cfg // Apply may replace it between steps
	firing := e.firingModels()
	e.mu.Unlock()
	f := &frame{
		now: now, src: e.opts.Latency, slice: e.opts.SliceLength, cfg: cfg,
		recent: map[string]map[string]monitor.RecentStats{}, models: map[string]correlate.ModelState{},
		baselines: e.opts.Baselines, trends: e.trends, anomaly: e.anomaly,
	}
	if e.opts.Models != nil {
		for _, ms := range e.opts.Models() {
			f.models[ms.Model] = ms
		}
	}
	if e.opts.GPU != nil {
		f.gpus = e.opts.GPU()
	}
	if e.opts.Releases != nil {
		f.releases = map[string]ReleaseState{}
		for _, rs := range e.opts.Releases.Releases() {
			f.releases[rs.Model] = rs
		}
	}
	// Every model's second is scored before the rules read it, outside
	// the lock; a model with a firing alert is not learnt. Only when a
	// rule reads the scores: the detectors cost memory per model
	// (Config.Anomaly).
	if cfg.readsAnomaly() {
		e.anomaly.step(f, firing)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := newStep(f)
	e.pipeline.exec(withNow(context.Background(), now), s)
	e.muted = s.muted
	e.lastEval, e.evalTook = now, e.opts.Now().Sub(now)
	e.metrics.observe(e.cfg.rules, e.alerts, e.evalTook)
}
