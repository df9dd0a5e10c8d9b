package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/infergate/infergate/internal/childproc"
)

// Models of the failover scenario: the big model on the primary and the
// small one the edge serves in its place.
const (
	FailoverModel         = "resnet50"
	FailoverFallbackModel = "mobilenet_v3"
)

// Modes of starting infergate.
const (
	// FailoverModeConfig names the upstreams, breaker and route in the
	// --config YAML file.
	FailoverModeConfig = "config"
	// FailoverModeFlags passes --upstream and --fallback only (infergate's
	// default breaker and hedging).
	FailoverModeFlags = "flags"
)

// RouteChangesMetric is infergate's counter of route changes, read from
// its admin /metrics before and after each fault when it exists.
const RouteChangesMetric = "infergate_route_changes_total"

// FailoverFaults are the faults in the order they are injected.
var FailoverFaults = []string{FaultHang, FaultErrors, FaultSlowdown, FaultDrop, FaultKill}

// FailoverBreaker is the primary's circuit breaker in the config file.
// Zero values are documented defaults.
type FailoverBreaker struct {
	// ConsecutiveFailures opens the breaker; zero means 5.
	ConsecutiveFailures int
	// FailureRatio opens it over Window once MinCalls were seen; zero
	// means 0.5, MinCalls 20, Window 10 s.
	FailureRatio float64
	MinCalls     int
	Window       time.Duration
	// SlowCall counts a slower call as a failure; zero means 250 ms.
	SlowCall time.Duration
	// OpenFor is how long it stays open before probing; zero means 2 s.
	OpenFor time.Duration
	// Probes are the calls let through half-open; zero means 5.
	Probes int
}

// FailoverConfig configures RunFailover. Zero values are documented
// defaults.
type FailoverConfig struct {
	// Simserver and Infergate are the binaries; both required.
	Simserver, Infergate string
	// InfergateArgs are added to infergate's arguments.
	InfergateArgs []string
	// Rate is the open-loop call rate; zero means 200.
	Rate float64
	// Timeout is every call's deadline; zero means 1 s.
	Timeout time.Duration
	// FaultTime holds each fault; zero means 20 s.
	FaultTime time.Duration
	// Recovery follows each heal; zero means 20 s.
	Recovery time.Duration
	// Lead is the steady load before the first fault; zero means 5 s.
	Lead time.Duration
	// Faults to inject, in order; empty means FailoverFaults.
	Faults []string
	// FlagsOnly starts infergate with --upstream/--fallback instead of a
	// config file naming the upstreams.
	FlagsOnly bool
	// Breaker and HedgeAfter (zero means 100 ms) go into the config file.
	Breaker    FailoverBreaker
	HedgeAfter time.Duration
	// PrimarySlots are resnet50's execution slots on the primary; zero
	// means 4 (simserver's default of 1 saturates at ~180 calls/s).
	PrimarySlots int
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
func (c *FailoverConfig) Validate() error {
	defaultTo(&c.Rate, 200)
	defaultTo(&c.Timeout, time.Second)
	defaultTo(&c.FaultTime, 20*time.Second)
	defaultTo(&c.Recovery, 20*time.Second)
	defaultTo(&c.Lead, 5*time.Second)
	defaultTo(&c.HedgeAfter, 100*time.Millisecond)
	defaultTo(&c.PrimarySlots, 4)
	defaultTo(&c.Conns, 4)
	b := &c.Breaker
	defaultTo(&b.ConsecutiveFailures, 5)
	defaultTo(&b.FailureRatio, 0.5)
	defaultTo(&b.MinCalls, 20)
	defaultTo(&b.Window, 10*time.Second)
	defaultTo(&b.SlowCall, 250*time.Millisecond)
	defaultTo(&b.OpenFor, 2*time.Second)
	defaultTo(&b.Probes, 5)
	if len(c.Faults) == 0 {
		c.Faults = slices.Clone(FailoverFaults)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	if c.Rate <= 0 || c.Timeout < 0 || c.FaultTime < 0 || c.Recovery < 0 || c.Lead < 0 || c.HedgeAfter < 0 {
		errs = append(errs, errors.New("failover: rate, timeout, fault time, recovery, lead and hedge-after must be positive"))
	}
	if c.PrimarySlots < 0 || c.Conns < 0 {
		errs = append(errs, errors.New("failover: primary slots and conns must be positive"))
	}
	if b.ConsecutiveFailures < 0 || b.MinCalls < 0 || b.Probes < 0 || b.Window < 0 || b.SlowCall < 0 || b.OpenFor < 0 {
		errs = append(errs, errors.New("failover: breaker settings must be positive"))
	}
	if b.FailureRatio <= 0 || b.FailureRatio > 1 {
		errs = append(errs, fmt.Errorf("failover: failure ratio %g: want 0 < ratio <= 1", b.FailureRatio))
	}
	seen := map[string]bool{}
	for _, f := range c.Faults {
		if !slices.Contains(FailoverFaults, f) {
			errs = append(errs, fmt.Errorf("failover: fault %q: want one of %s", f, strings.Join(FailoverFaults, ", ")))
		} else if seen[f] {
			errs = append(errs, fmt.Errorf("failover: fault %q given twice", f))
		}
		seen[f] = true
	}
	for _, bin := range []struct{ name, path string }{{"simserver", c.Simserver}, {"infergate", c.Infergate}} {
		if bin.path == "" {
			errs = append(errs, fmt.Errorf("failover: %s: binary path required", bin.name))
		} else if _, err := os.Stat(bin.path); err != nil {
			errs = append(errs, fmt.Errorf("failover: %s %s: %w", bin.name, bin.path, errMissingBinary))
		}
	}
	return errors.Join(errs...)
}

// FailoverDuration is the length of a run with cfg (defaults filled): the
// lead and each fault's hold and recovery.
func FailoverDuration(cfg FailoverConfig) time.Duration {
	return cfg.Lead + time.Duration(len(cfg.Faults))*(cfg.FaultTime+cfg.Recovery)
}

// failoverConfigYAML is infergate's --config file: the two upstreams, the
// primary's breaker and the route of resnet50 with its fallback.
func failoverConfigYAML(cfg FailoverConfig, primary, edge string) string {
	b := cfg.Breaker
	return fmt.Sprintf(`upstreams:
  - name: primary
    address: %s
    breaker: {consecutive_failures: %d, failure_ratio: %g, min_calls: %d, window: %s, slow_call: %s, open_for: %s, probes: %d}
  - name: edge
    address: %s
routes:
  - model: %s
    upstream: primary
    fallback: {upstream: edge, model: %s}
    hedge_after: %s
`, primary, b.ConsecutiveFailures, b.FailureRatio, b.MinCalls, b.Window, b.SlowCall, b.OpenFor, b.Probes,
		edge, FailoverModel, FailoverFallbackModel, cfg.HedgeAfter)
}

// failoverFallbackFlag is --fallback's value: MODEL=ADDR/FALLBACK_MODEL.
func failoverFallbackFlag(edge string) string {
	return FailoverModel + "=" + edge + "/" + FailoverFallbackModel
}

// failoverInfergateArgs are infergate's arguments but the listeners.
func failoverInfergateArgs(cfg FailoverConfig, configPath, primary, edge string) []string {
	var args []string
	if cfg.FlagsOnly {
		args = []string{"--upstream", primary, "--fallback", failoverFallbackFlag(edge)}
	} else {
		args = []string{"--config", configPath}
	}
	args = append(args, "--log-level", "info", "--drain-delay", "0s")
	return append(args, cfg.InfergateArgs...)
}

// failoverModelsYAML is a simserver models file serving one classifier
// (examples/simserver's resnet50 or mobilenet_v3) with the given slots.
func failoverModelsYAML(name string, slots int, baseMs, perItemMs, tailProb float64) string {
	tail := ""
	if tailProb > 0 {
		tail = fmt.Sprintf("\n      tail_probability: %g\n      tail_min_factor: 4\n      tail_max_factor: 8", tailProb)
	}
	return fmt.Sprintf(`models:
  - name: %s
    kind: classifier
    platform: tensorrt_plan
    protocols: [kserve, tfserving]
    max_batch: 64
    slots: %d
    inputs:
      - {name: input, datatype: FP32, dims: [64]}
    outputs:
      - {name: probs, datatype: FP32, dims: [10]}
    latency:
      base_ms: %g
      per_item_ms: %g%s
`, name, slots, baseMs, perItemMs, tail)
}

// failoverFault is simserver's fault object.
type failoverFault struct {
	Model           string  `json:"model"`
	Hang            bool    `json:"hang,omitempty"`
	ErrorRate       float64 `json:"error_rate,omitempty"`
	ErrorCode       string  `json:"error_code,omitempty"`
	Slowdown        float64 `json:"slowdown,omitempty"`
	DropConnections bool    `json:"drop_connections,omitempty"`
}

// failoverFaultOf is the simserver fault of kind (none for the kill) and
// what the report calls it.
func failoverFaultOf(kind string) (*failoverFault, string) {
	switch kind {
	case FaultHang:
		return &failoverFault{Model: FailoverModel, Hang: true}, "resnet50 hangs"
	case FaultErrors:
		return &failoverFault{Model: FailoverModel, ErrorRate: 1, ErrorCode: "INTERNAL"}, "100% INTERNAL"
	case FaultSlowdown:
		return &failoverFault{Model: FailoverModel, Slowdown: 10}, "10x slowdown"
	case FaultDrop:
		return &failoverFault{Model: FailoverModel, DropConnections: true}, "connections dropped"
	}
	return nil, "primary SIGKILLed, restarted on its port"
}

// simFaults drives simserver's fault API.
type simFaults struct {
	client *http.Client
}

func (s simFaults) do(ctx context.Context, method, admin string, body any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+admin+"/api/v1/faults", rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("failover: fault %s: %w", method, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("failover: fault %s %v: %s: %s", method, body, resp.Status, msg)
	}
	return nil
}

// parseRouteChanges sums every series of RouteChangesMetric in a text
// exposition; ok is false when the metric is absent.
func parseRouteChanges(body []byte) (total float64, ok bool, err error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return 0, false, fmt.Errorf("parse metrics: %w", err)
	}
	f, found := fams[RouteChangesMetric]
	if !found {
		return 0, false, nil
	}
	for _, m := range f.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			total += m.GetUntyped().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total, true, nil
}

// failoverRun is the state of one run.
type failoverRun struct {
	cfg     *FailoverConfig
	ctx     context.Context
	dir     string
	start   time.Time
	ig      *childproc.Proc
	admin   string // infergate's
	primary *childproc.Proc
	simAddr string // the primary's gRPC address, kept across the restart
	simAdm  string // the primary's admin address (changes on restart)
	faults  simFaults
	starts  int // primary starts, for the log names
}

func (r *failoverRun) since() float64 { return time.Since(r.start).Seconds() }

func (r *failoverRun) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Log, "bench: failover: t=%.1fs: %s\n", r.since(), fmt.Sprintf(format, args...))
}

// sleep waits d, or fails when ctx ends or infergate exits.
func (r *failoverRun) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.ctx.Done():
		return fmt.Errorf("failover: %w", r.ctx.Err())
	case <-r.ig.Done():
		return fmt.Errorf("failover: infergate exited (%v): %s", r.ig.Err(), r.ig.Tail())
	}
}

// routeChanges scrapes infergate's counter; nil when absent or unreadable.
func (r *failoverRun) routeChanges() *float64 {
	body, _, err := scrapeMetrics(r.ctx, r.admin)
	if err != nil {
		r.logf("scrape: %v", err)
		return nil
	}
	v, ok, err := parseRouteChanges(body)
	if err != nil {
		r.logf("%v", err)
		return nil
	}
	if !ok {
		return nil
	}
	return &v
}

// startPrimary starts the primary simserver on listen ("127.0.0.1:0" the
// first time, its old address after the kill). A restart on the old port
// is retried for a few seconds in case the port is still held.
func (r *failoverRun) startPrimary(models, listen string) error {
	var lastErr error
	r.starts++
	for try := 0; try < 10; try++ {
		p, m, err := StartProcess(r.ctx, childproc.Spec{
			Name: "simserver (primary)", Path: r.cfg.Simserver,
			Args:    []string{"--listen", listen, "--admin", "127.0.0.1:0", "--config", models},
			LogPath: filepath.Join(r.dir, fmt.Sprintf("primary-%d.log", r.starts)), Ready: simserverLine,
		})
		if err == nil {
			r.primary, r.simAddr, r.simAdm = p, m[1], m[2]
			return nil
		}
		lastErr = err
		if r.ctx.Err() != nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("failover: %w", lastErr)
}

// RunFailover starts a primary simserver (resnet50), an edge simserver
// (mobilenet_v3) and infergate in front with resnet50 falling back to the
// edge's mobilenet_v3, drives open-loop load through it, injects each
// fault of cfg.Faults on the primary for cfg.FaultTime, heals it, waits
// cfg.Recovery, and reports how the routes and calls fared.
func RunFailover(ctx context.Context, cfg FailoverConfig) (*FailoverReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, cleanup, err := workDir("failover", cfg.WorkDir, cfg.KeepWorkDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(cfg.Log, "bench: failover: work dir %s; about %s\n", dir, FailoverDuration(cfg).Round(time.Second))
	primaryModels, edgeModels := filepath.Join(dir, "primary-models.yaml"), filepath.Join(dir, "edge-models.yaml")
	for _, f := range []struct{ path, yaml string }{
		{primaryModels, failoverModelsYAML(FailoverModel, cfg.PrimarySlots, 5, 0.25, 0.01)},
		{edgeModels, failoverModelsYAML(FailoverFallbackModel, 4, 1, 0.05, 0)},
	} {
		if err := os.WriteFile(f.path, []byte(f.yaml), 0o644); err != nil {
			return nil, fmt.Errorf("failover: %w", err)
		}
	}
	r := &failoverRun{cfg: &cfg, ctx: ctx, dir: dir, faults: simFaults{client: &http.Client{Timeout: 5 * time.Second}}}
	if err := r.startPrimary(primaryModels, "127.0.0.1:0"); err != nil {
		return nil, err
	}
	defer func() { r.primary.Stop() }()
	edge, m, err := StartProcess(ctx, childproc.Spec{
		Name: "simserver (edge)", Path: cfg.Simserver,
		Args:    []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", edgeModels},
		LogPath: filepath.Join(dir, "edge.log"), Ready: simserverLine,
	})
	if err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	defer edge.Stop()
	edgeAddr := m[1]

	configPath := filepath.Join(dir, "infergate.yaml")
	configYAML := failoverConfigYAML(cfg, r.simAddr, edgeAddr)
	mode := FailoverModeConfig
	if cfg.FlagsOnly {
		mode, configYAML = FailoverModeFlags, ""
	} else if err := os.WriteFile(configPath, []byte(configYAML), 0o644); err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	igArgs := failoverInfergateArgs(cfg, configPath, r.simAddr, edgeAddr)
	ig, listen, admin, err := startInfergateArgs(ctx, cfg.Infergate, filepath.Join(dir, "infergate.log"), igArgs)
	if err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	defer ig.Stop()
	r.ig, r.admin = ig, admin
	fmt.Fprintf(cfg.Log, "bench: failover: primary %s, edge %s, infergate grpc=%s admin=%s (%s)\n",
		r.simAddr, edgeAddr, listen, admin, strings.Join(igArgs, " "))

	ld, err := newFailoverLoad(listen, FailoverModel, FailoverFallbackModel, cfg.Rate, cfg.Timeout, cfg.Conns)
	if err != nil {
		return nil, err
	}
	defer ld.close()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	r.start = time.Now()
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); ld.run(loadCtx, r.start) }()

	windows, deltas, err := r.sequence(primaryModels)
	stopLoad()
	<-loadDone
	if err != nil {
		return nil, err
	}
	sent, calls := ld.snapshot()
	base := FailoverReport{
		Model: FailoverModel, FallbackModel: FailoverFallbackModel, Rate: cfg.Rate, Timeout: cfg.Timeout.Seconds(),
		FaultTime: cfg.FaultTime.Seconds(), Recovery: cfg.Recovery.Seconds(), Lead: cfg.Lead.Seconds(), Duration: r.since(),
		Mode: mode, InfergateArgs: igArgs, ConfigYAML: configYAML, RouteHeaderSeen: ld.headerSeen.Load(), Late: ld.late.Load(),
	}
	return newFailoverReport(base, sent, calls, windows, deltas), nil
}

// sequence runs the lead, then each fault: inject, hold, heal, recover.
func (r *failoverRun) sequence(primaryModels string) ([]FailoverWindow, map[string]*float64, error) {
	cfg := r.cfg
	r.logf("steady load %s calls/s for %s", fmt.Sprint(cfg.Rate), cfg.Lead)
	if err := r.sleep(cfg.Lead); err != nil {
		return nil, nil, err
	}
	var windows []FailoverWindow
	deltas := map[string]*float64{}
	for _, kind := range cfg.Faults {
		before := r.routeChanges()
		fault, what := failoverFaultOf(kind)
		w := FailoverWindow{Kind: kind, What: what, Injected: r.since()}
		if fault != nil {
			if err := r.faults.do(r.ctx, http.MethodPost, r.simAdm, fault); err != nil {
				return nil, nil, err
			}
		} else {
			r.primary.Kill()
		}
		r.logf("%s injected: %s", kind, what)
		if err := r.sleep(cfg.FaultTime); err != nil {
			return nil, nil, err
		}
		if fault != nil {
			if err := r.faults.do(r.ctx, http.MethodDelete, r.simAdm, nil); err != nil {
				return nil, nil, err
			}
		} else if err := r.startPrimary(primaryModels, r.simAddr); err != nil {
			return nil, nil, err
		}
		w.Healed = r.since()
		r.logf("%s healed", kind)
		if err := r.sleep(cfg.Recovery); err != nil {
			return nil, nil, err
		}
		w.End = r.since()
		if after := r.routeChanges(); before != nil && after != nil {
			d := *after - *before
			deltas[kind] = &d
		}
		windows = append(windows, w)
	}
	return windows, deltas, nil
}
