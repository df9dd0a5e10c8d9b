package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/childproc"
)

// DetectModel is the simulated model the detect scenario drives.
const DetectModel = "recsys"

// The model's latency. simserver's GPU utilisation is the union of the
// executions' busy time, so a model that computed for 100 ms at 100
// calls/s would show the GPU 100% busy all day and GPUSaturated would
// never be quiet. recsys therefore computes briefly (about 4 ms, 2% of
// executions ×10..×13, which makes the p99) and the rest of its ~100 ms
// is simserver's post-execution delay_ms (pre/post-processing, not
// holding the GPU): p50 ≈ 105 ms, p99 ≈ 150 ms, GPU ≈ 50% busy at 100
// calls/s and ≈ 78% at 160.
const (
	detectComputeMs  = 4.0
	detectPerItemMs  = 0.1
	detectTailProb   = 0.02
	detectTailMin    = 10.0
	detectTailMax    = 13.0
	detectSlots      = 4
	detectBaseDelay  = 100.0 // ms of delay_ms at the quietest hour
	detectPeakDelay  = 40.0  // ms added at the weekday peak (09:00–11:00)
	detectDailyDelay = 10.0  // ms of daytime swell, weekends included
)

// detectModelsYAML is simserver's models file: examples/simserver's
// resnet50 entry, renamed and reshaped as above.
var detectModelsYAML = fmt.Sprintf(`models:
  - name: %s
    kind: classifier
    platform: tensorrt_plan
    protocols: [kserve]
    max_batch: 64
    slots: %d
    inputs:
      - {name: input, datatype: FP32, dims: [64]}
    outputs:
      - {name: probs, datatype: FP32, dims: [10]}
    latency:
      base_ms: %g
      per_item_ms: %g
      tail_probability: %g
      tail_min_factor: %g
      tail_max_factor: %g
`, DetectModel, detectSlots, detectComputeMs, detectPerItemMs, detectTailProb, detectTailMin, detectTailMax)

// detectGPUCapacity is the call rate at which recsys keeps simserver's one
// GPU busy all the time: 1 / mean compute time.
func detectGPUCapacity() float64 {
	mean := (detectComputeMs + detectPerItemMs) * (1 + detectTailProb*((detectTailMin+detectTailMax)/2-1))
	return 1000 / mean
}

// Incident kinds, as rows of the report.
const (
	DetectReference = "reference"
	DetectCreep     = "creep"
	DetectErrors    = "errors"
	DetectGPU       = "gpu"
)

// Rules of infergate's default set the incidents are expected to fire.
const (
	RuleLatency = "ModelLatencyAboveBaseline"
	RuleErrors  = "ModelErrorRatio"
	RuleGPU     = "GPUSaturated"
)

// DetectConfig configures RunDetect. Zero values are documented defaults.
type DetectConfig struct {
	// Simserver and Infergate are the binaries; both required.
	Simserver, Infergate string
	// Scale is the compression of simulated time (infergate's baseline
	// time_scale); zero means 1440, a simulated day per real minute.
	Scale float64
	// Days of pattern to replay; the first half is learned, the second
	// judged for false alerts. Zero means 14, negative none.
	Days float64
	// ColdStart is the first stretch of the days, judged on its own for
	// false alerts: a fresh infergate, no baseline yet, and the load
	// ramping from zero to the pattern's rate over its first half (what
	// paged at cold start before issue 36). Zero means 60 s, negative
	// none; it ends within the learning half.
	ColdStart time.Duration
	// RateMin is the pattern's lowest call rate; zero means 100. The
	// highest is 1.6 × RateMin (a weekday afternoon).
	RateMin float64
	// Calm is the quiet stretch before each incident; zero means 30 s.
	Calm time.Duration
	// Hold bounds each incident (until firing); zero means 90 s.
	Hold time.Duration
	// CreepHold bounds the creep; zero means 6 minutes.
	CreepHold time.Duration
	// CreepStep is the creep's added delay per real minute; zero means 10 ms.
	CreepStep float64
	// Recovery follows each healed incident; zero means 30 s.
	Recovery time.Duration
	// GPUFactor multiplies the GPU capacity (detectGPUCapacity) for the
	// saturation incident; zero means 3.
	GPUFactor float64
	// Light is the steady light-load phase; zero means 10 minutes,
	// negative none. LightRate is its rate; zero means 20.
	Light     time.Duration
	LightRate float64
	// Timeout bounds each call; zero means 10 s.
	Timeout time.Duration
	// Conns is the number of client connections; zero means 4.
	Conns int
	// WorkDir holds the logs and config files; empty means a new
	// temporary folder, removed afterwards unless KeepWorkDir is set.
	WorkDir     string
	KeepWorkDir bool
	// Log receives progress lines; nil means none.
	Log io.Writer
}

// Validate fills defaults and reports every problem, joined.
func (c *DetectConfig) Validate() error {
	defaultTo(&c.Scale, 1440)
	defaultTo(&c.Days, 14)
	defaultTo(&c.RateMin, 100)
	defaultTo(&c.CreepStep, 10)
	defaultTo(&c.GPUFactor, 3)
	defaultTo(&c.LightRate, 20)
	defaultTo(&c.Calm, 30*time.Second)
	defaultTo(&c.Hold, 90*time.Second)
	defaultTo(&c.CreepHold, 6*time.Minute)
	defaultTo(&c.Recovery, 30*time.Second)
	defaultTo(&c.Light, 10*time.Minute)
	defaultTo(&c.Timeout, 10*time.Second)
	defaultTo(&c.ColdStart, time.Minute)
	if c.ColdStart < 0 {
		c.ColdStart = 0
	}
	if c.Days < 0 {
		c.Days = 0
	}
	if c.Light < 0 {
		c.Light = 0
	}
	defaultTo(&c.Conns, 4)
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	if c.Scale < 1 {
		errs = append(errs, fmt.Errorf("detect: scale %g: must be at least 1", c.Scale))
	}
	if c.RateMin <= 0 || c.LightRate <= 0 || c.GPUFactor <= 0 || c.CreepStep <= 0 {
		errs = append(errs, errors.New("detect: rate-min, light rate, GPU factor and creep step must be positive"))
	}
	if c.Calm < 0 || c.Hold < 0 || c.CreepHold < 0 || c.Recovery < 0 || c.Timeout < 0 || c.Conns < 0 {
		errs = append(errs, errors.New("detect: calm, hold, creep hold, recovery, timeout and conns must be positive"))
	}
	for _, b := range []struct{ name, path string }{{"simserver", c.Simserver}, {"infergate", c.Infergate}} {
		if b.path == "" {
			errs = append(errs, fmt.Errorf("detect: %s: binary path required", b.name))
		} else if _, err := os.Stat(b.path); err != nil {
			errs = append(errs, fmt.Errorf("detect: %s %s: %w", b.name, b.path, errMissingBinary))
		}
	}
	return errors.Join(errs...)
}

// DetectDuration is the real time a run with cfg (defaults filled) takes,
// at most: the days, each incident's calm + hold + recovery, the light
// phase.
func DetectDuration(cfg DetectConfig) time.Duration {
	days := time.Duration(cfg.Days * 86400 / cfg.Scale * float64(time.Second))
	inc := 3*(cfg.Calm+cfg.Hold+cfg.Recovery) + cfg.Calm + cfg.CreepHold + cfg.Recovery
	return days + inc + cfg.Light
}

// detectPattern is the normal world at simulated time t: the call rate
// and the delay_ms added to recsys. Rate follows the day (lowest at
// 04:00, highest at 16:00) between rateMin and 1.6 × rateMin on
// weekdays, up to 1.3 × rateMin on weekends, never below rateMin. Delay
// is the base, a daytime swell of up to 10 ms every day, and on weekdays
// a 40 ms peak from 09:00 to 11:00 reached by hour-long ramps.
func detectPattern(t time.Time, rateMin float64) (rate, delayMs float64) {
	h := float64(t.Hour()) + float64(t.Minute())/60 + float64(t.Second())/3600
	day := 0.5 - 0.5*math.Cos(2*math.Pi*(h-4)/24) // 0 at 04:00, 1 at 16:00
	weekend := t.Weekday() == time.Saturday || t.Weekday() == time.Sunday
	swing := 0.6
	if weekend {
		swing = 0.3
	}
	rate = rateMin * (1 + swing*day)
	extra := detectDailyDelay * day
	if !weekend {
		var peak float64
		switch {
		case h >= 8 && h < 9:
			peak = h - 8
		case h >= 9 && h < 11:
			peak = 1
		case h >= 11 && h < 12:
			peak = 12 - h
		}
		extra = math.Max(extra, detectPeakDelay*peak)
	}
	return rate, detectBaseDelay + extra
}

// detectFault is simserver's fault object for recsys.
type detectFault struct {
	Model     string  `json:"model"`
	Slowdown  float64 `json:"slowdown,omitempty"`
	DelayMS   float64 `json:"delay_ms"`
	ErrorRate float64 `json:"error_rate,omitempty"`
	ErrorCode string  `json:"error_code,omitempty"`
}

// detectWorld drives the load and simserver's fault every second from the
// pattern and the incident in force. The fault API replaces a model's
// fault, so every fault carries the pattern's delay too.
type detectWorld struct {
	cfg      *DetectConfig
	simAdmin string
	load     *detectLoad
	start    time.Time // infergate's baseline clock started about then
	client   *http.Client

	mu   sync.Mutex
	inc  detectIncident
	rate float64 // what the load was last set to
}

// detectIncident modifies the pattern; the zero value is normal.
type detectIncident struct {
	slowdown  float64   // compute ×, and the delay × as well (latency × overall)
	creepFrom time.Time // non-zero: delay grows CreepStep ms per minute since then
	errorRate float64
	rate      float64 // non-zero: call rate instead of the pattern's
	steady    bool    // no pattern: base delay, rate as set
}

// simNow is the simulated time now: the baseline's clock, sped up.
func (w *detectWorld) simNow() time.Time {
	return w.start.Add(time.Duration(float64(time.Since(w.start)) * w.cfg.Scale))
}

// set changes the incident and applies it at once, returning when
// simserver has it.
func (w *detectWorld) set(ctx context.Context, inc detectIncident) error {
	w.mu.Lock()
	w.inc = inc
	w.mu.Unlock()
	return w.apply(ctx)
}

// apply sets the load's rate and posts the fault for now.
func (w *detectWorld) apply(ctx context.Context) error {
	w.mu.Lock()
	inc := w.inc
	w.mu.Unlock()
	rate, delay := detectPattern(w.simNow(), w.cfg.RateMin)
	if ramp := w.cfg.ColdStart / 2; ramp > 0 && time.Since(w.start) < ramp {
		// The cold start: from one call a second to the pattern's rate.
		rate = max(rate*float64(time.Since(w.start))/float64(ramp), 1)
	}
	if inc.steady {
		delay = detectBaseDelay
	}
	if inc.rate > 0 {
		rate = inc.rate
	}
	f := detectFault{Model: DetectModel, DelayMS: delay}
	if inc.slowdown > 0 {
		f.Slowdown = inc.slowdown
		f.DelayMS = math.Round(delay * inc.slowdown)
	}
	if !inc.creepFrom.IsZero() {
		f.DelayMS += w.cfg.CreepStep * time.Since(inc.creepFrom).Minutes()
	}
	if inc.errorRate > 0 {
		f.ErrorRate, f.ErrorCode = inc.errorRate, "INTERNAL"
	}
	w.load.setRate(rate)
	w.mu.Lock()
	w.rate = rate
	w.mu.Unlock()
	return w.post(ctx, f)
}

func (w *detectWorld) currentRate() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rate
}

func (w *detectWorld) post(ctx context.Context, f detectFault) error {
	body, _ := json.Marshal(f)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+w.simAdmin+"/api/v1/faults", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("detect: fault: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("detect: fault %s: %s: %s", body, resp.Status, msg)
	}
	return nil
}

// run re-applies the pattern every second until ctx ends.
func (w *detectWorld) run(ctx context.Context, errc chan<- error) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := w.apply(ctx); err != nil && ctx.Err() == nil {
				select {
				case errc <- err:
				default:
				}
				return
			}
		}
	}
}

// RunDetect starts simserver (recsys) and infergate with its default
// rules and a compressed baseline clock, replays cfg.Days of the pattern,
// injects the four incidents, runs the light phase, and reports when
// each alert went pending and firing, the false alerts, and what a
// Prometheus rule on the same histogram would have done.
func RunDetect(ctx context.Context, cfg DetectConfig) (*DetectReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, cleanup, err := workDir("detect", cfg.WorkDir, cfg.KeepWorkDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(cfg.Log, "bench: detect: work dir %s; at most %s\n", dir, DetectDuration(cfg).Round(time.Second))
	models, rules := filepath.Join(dir, "models.yaml"), filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(models, []byte(detectModelsYAML), 0o644); err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	// No rules: key, so the built-in default rules run, as on day one.
	rulesYAML := fmt.Sprintf("baseline: {time_scale: %g}\nroute: {receiver: log}\n", cfg.Scale)
	if err := os.WriteFile(rules, []byte(rulesYAML), 0o644); err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	sim, m, err := StartProcess(ctx, childproc.Spec{
		Name: "simserver", Path: cfg.Simserver,
		Args:    []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", models},
		LogPath: filepath.Join(dir, "simserver.log"), Ready: simserverLine,
	})
	if err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	defer sim.Stop()
	simGRPC, simAdmin := m[1], m[2]
	// The baseline store's clock starts while infergate starts; the
	// pattern's clock starts at its ready line, within a fraction of a
	// second (a few simulated minutes at ×1440).
	ig, listen, admin, err := startInfergate(ctx, cfg.Infergate, simGRPC, filepath.Join(dir, "infergate.log"), []string{
		"--gpu-source", "prometheus", "--gpu-metrics-url", "http://" + simAdmin + "/metrics",
		"--rules", rules, "--log-level", "info", "--drain-delay", "0s",
	})
	if err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	defer ig.Stop()
	start := time.Now()
	fmt.Fprintf(cfg.Log, "bench: detect: infergate grpc=%s admin=%s, simserver admin=%s\n", listen, admin, simAdmin)

	pl, err := load.NewPayload(load.KServe, DetectModel, []load.Tensor{{Name: "input", Datatype: "FP32", Shape: []int64{1, 64}}})
	if err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	ld, err := newDetectLoad(listen, pl, cfg.Conns, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	defer ld.close()
	world := &detectWorld{cfg: &cfg, simAdmin: simAdmin, load: ld, start: start, client: &http.Client{Timeout: 5 * time.Second}}
	watch := newDetectWatch(admin, DetectModel, start)
	rep := newDetectReport(cfg, start)

	bg, stopBG := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	defer func() { stopBG(); bgWG.Wait() }()
	if err := world.apply(ctx); err != nil {
		return nil, err
	}
	worldErr := make(chan error, 1)
	bgWG.Go(func() { world.run(bg, worldErr) })
	bgWG.Go(func() { watch.run(bg) })
	bgWG.Go(func() { ld.run(bg) })

	r := &detectRun{cfg: &cfg, ctx: ctx, world: world, watch: watch, rep: rep, worldErr: worldErr, ig: ig}
	if err := r.phases(); err != nil {
		return nil, err
	}
	stopBG()
	bgWG.Wait()
	rep.finish(watch, ld.seconds(start, true), ld.late.Load())
	return rep, nil
}

// detectRun is the sequence of phases of one run.
type detectRun struct {
	cfg      *DetectConfig
	ctx      context.Context
	world    *detectWorld
	watch    *detectWatch
	rep      *DetectReport
	worldErr chan error
	ig       *childproc.Proc
}

// sleep waits d, or fails when ctx ends or the world stopped.
func (r *detectRun) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.ctx.Done():
		return fmt.Errorf("detect: %w", r.ctx.Err())
	case err := <-r.worldErr:
		return fmt.Errorf("%w (infergate log: %s)", err, r.ig.Tail())
	}
}

func (r *detectRun) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Log, "bench: detect: t=%s sim=%s rate=%.0f/s: %s\n", fmtAt(time.Since(r.world.start)),
		r.world.simNow().Format("Mon 15:04"), r.world.currentRate(), fmt.Sprintf(format, args...))
}

func (r *detectRun) phases() error {
	cfg := r.cfg
	// Phase 1: the normal days, printing progress every simulated day
	// (every 10 s when days are short).
	days := time.Duration(cfg.Days * 86400 / cfg.Scale * float64(time.Second))
	r.rep.LearnEnd = days.Seconds() / 2
	r.rep.DaysEnd = days.Seconds()
	r.rep.ColdEnd = min(cfg.ColdStart.Seconds(), r.rep.LearnEnd)
	r.logf("replaying %.3g days (learn %s, judged %s), simulated start %s", cfg.Days,
		fmtAt(days/2), fmtAt(days-days/2), r.world.start.Format("Mon 2006-01-02 15:04"))
	step := min(max(time.Duration(86400/cfg.Scale*float64(time.Second)), 10*time.Second), max(days, time.Second))
	for t0 := time.Now(); time.Since(t0) < days; {
		if err := r.sleep(min(step, days-time.Since(t0))); err != nil {
			return err
		}
		b, _ := r.watch.lastBand()
		r.logf("baseline %s (%d hours learned, %d weeks) p99 %.0f ms up above %.0f ms; active %v",
			b.Source, b.Hours, b.Weeks, b.Median, b.UpAbove, r.watch.active())
	}
	if b, ok := r.watch.lastBand(); ok {
		r.rep.BaselineAtEnd = &b
	}

	// Phase 2: the incidents.
	capacity := detectGPUCapacity()
	incidents := []struct {
		kind, rule string
		hold       time.Duration
		inc        func() detectIncident
		what       string
	}{
		{DetectReference, RuleLatency, cfg.Hold, func() detectIncident { return detectIncident{slowdown: 1.47} },
			"latency x1.47 (simserver slowdown 1.47, delay_ms x1.47)"},
		{DetectCreep, RuleLatency, cfg.CreepHold, func() detectIncident { return detectIncident{creepFrom: time.Now()} },
			fmt.Sprintf("delay_ms +%g ms per minute", cfg.CreepStep)},
		{DetectErrors, RuleErrors, cfg.Hold, func() detectIncident { return detectIncident{errorRate: 0.05} },
			"5% INTERNAL errors"},
		{DetectGPU, RuleGPU, cfg.Hold, func() detectIncident { return detectIncident{rate: cfg.GPUFactor * capacity} },
			fmt.Sprintf("load %.0f calls/s = %gx the GPU's capacity (%.0f calls/s)", cfg.GPUFactor*capacity, cfg.GPUFactor, capacity)},
	}
	for _, in := range incidents {
		if err := r.sleep(cfg.Calm); err != nil {
			return err
		}
		// A calm stretch has no alert active; wait up to a hold for one
		// still active (a false alert, or the last incident's keep_firing_for).
		waited := time.Duration(0)
		for len(r.watch.active()) > 0 && waited < cfg.Hold {
			if err := r.sleep(250 * time.Millisecond); err != nil {
				return err
			}
			waited += 250 * time.Millisecond
		}
		row := DetectIncidentRow{Kind: in.kind, What: in.what, Rule: in.rule, Hold: in.hold.Seconds(),
			ActiveAtInjection: r.watch.active(), SimAt: r.world.simNow().Format("Mon 15:04"),
			Rate: r.world.currentRate()}
		if err := r.world.set(r.ctx, in.inc()); err != nil {
			return err
		}
		row.InjectedAt = r.watch.since()
		if in.kind == DetectGPU {
			row.Rate = r.world.currentRate()
		}
		r.logf("%s injected: %s", in.kind, in.what)
		for deadline := time.Now().Add(in.hold); time.Now().Before(deadline); {
			if err := r.sleep(100 * time.Millisecond); err != nil {
				return err
			}
			if r.rep.firedSince(r.watch, in.rule, row.InjectedAt) {
				break
			}
		}
		if err := r.world.set(r.ctx, detectIncident{}); err != nil {
			return err
		}
		row.HealedAt = r.watch.since()
		r.logf("%s healed after %s; active %v", in.kind, fmtAt(secs(row.HealedAt-row.InjectedAt)), r.watch.active())
		r.rep.Incidents = append(r.rep.Incidents, row)
		if err := r.sleep(cfg.Recovery); err != nil {
			return err
		}
	}

	// Phase 3: steady light load.
	if cfg.Light > 0 {
		if err := r.world.set(r.ctx, detectIncident{steady: true, rate: cfg.LightRate}); err != nil {
			return err
		}
		r.rep.LightFrom = r.watch.since()
		r.logf("light load %g calls/s for %s", cfg.LightRate, cfg.Light)
		if err := r.sleep(cfg.Light); err != nil {
			return err
		}
		r.rep.LightTo = r.watch.since()
		r.logf("light load done; active %v", r.watch.active())
	}
	return nil
}

// defaultTo sets *v to d when it is the zero value (a field left unset).
func defaultTo[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}
