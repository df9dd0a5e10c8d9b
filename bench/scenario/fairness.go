package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/internal/childproc"
)

// Paths of bench fairness.
const (
	PathInfergateFlow   = "infergate"
	PathInfergateNoFlow = "infergate-no-flow"
	PathHAProxyPriority = "haproxy-priority"
)

// FairnessTenant is one tenant of a case: its band (x-priority) and the
// rate it offers, as a share of the model's capacity.
type FairnessTenant struct {
	Name  string  `json:"name"`
	Band  string  `json:"band"`
	Share float64 `json:"share"`
}

// FairnessCase is a set of tenants offering load together.
type FairnessCase struct {
	Name    string           `json:"name"`
	Tenants []FairnessTenant `json:"tenants"`
}

// DefaultFairnessCases are the two: a critical tenant at 20% of
// capacity beside two standard ones offering 2.0x and 0.5x; and a
// critical one at 90% beside 0.5x and 0.25x.
var DefaultFairnessCases = []FairnessCase{
	{Name: "overload", Tenants: []FairnessTenant{{"A", "critical", 0.2}, {"B", "standard", 2.0}, {"C", "standard", 0.5}}},
	{Name: "critical-heavy", Tenants: []FairnessTenant{{"A", "critical", 0.9}, {"B", "standard", 0.5}, {"C", "standard", 0.25}}},
	{Name: "unsaturated", Tenants: []FairnessTenant{{"A", "standard", 0.25}, {"B", "standard", 0.25}}},
}

// FairnessConfig is one bench fairness run: one simserver resnet50 (one
// slot, batching off) saturated by tenants with their own rates, headers
// (x-tenant, x-priority) and bands, through infergate with flow control
// and HAProxy with set-priority-class in the same run.
type FairnessConfig struct {
	Simserver     string
	Infergate     string
	InfergateArgs []string
	// NoFlow adds infergate without flow control (as it was before it):
	// what flow control costs and changes, in the same run.
	NoFlow bool
	// HAProxy is the haproxy binary ("" leaves its path out;
	// HAProxySkipped says why in the report). HAProxyMaxConn is its
	// server's maxconn: the calls over it queue in HAProxy, in priority
	// class order.
	HAProxy        string
	HAProxySkipped string
	HAProxyThreads int
	HAProxyMaxConn int

	// Capacity is the model's saturated throughput (calls/s); 0 measures
	// it first (closed loop, 5 s): directly with 8 callers, or, when
	// InfergateArgs turn batching on, through infergate with 64.
	Capacity float64
	Cases    []FairnessCase
	// Only names the cases to run (of Cases); empty runs them all.
	Only []string
	// Duration is each case's measured time; the first tenant also runs
	// alone for it, for its p99 alone.
	Duration time.Duration
	// Timeout is each call's deadline.
	Timeout time.Duration
	// Workers caps each tenant's calls in flight.
	Workers int
	Rounds  int

	WorkDir     string
	KeepWorkDir bool
	Log         io.Writer
}

// Validate fills the defaults.
func (c *FairnessConfig) Validate() error {
	if len(c.Cases) == 0 {
		c.Cases = DefaultFairnessCases
	}
	if c.Duration == 0 {
		c.Duration = 15 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
	if c.Workers == 0 {
		c.Workers = 512
	}
	if c.Rounds == 0 {
		c.Rounds = 2
	}
	if c.HAProxyThreads == 0 {
		c.HAProxyThreads = 2
	}
	if c.HAProxyMaxConn == 0 {
		c.HAProxyMaxConn = 2
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	if _, err := os.Stat(c.Simserver); err != nil {
		errs = append(errs, fmt.Errorf("fairness: simserver %q: %w", c.Simserver, errMissingBinary))
	}
	for _, fc := range c.Cases {
		if len(fc.Tenants) < 2 {
			errs = append(errs, fmt.Errorf("fairness: case %s: at least two tenants", fc.Name))
		}
	}
	return errors.Join(errs...)
}

// TenantRun is one tenant's measure in one case.
type TenantRun struct {
	Name  string  `json:"name"`
	Band  string  `json:"band"`
	Offer float64 `json:"offered_rps"`
	// Goodput is its successful calls per second; FairShare what
	// max-min fairness gives it of what the more critical tenants leave
	// (0 for a critical tenant: it gets what it asks).
	Goodput   float64 `json:"goodput_rps"`
	FairShare float64 `json:"fair_share_rps,omitempty"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
	Answered  float64 `json:"answered"` // share of its calls answered
	Failed    int64   `json:"failed"`
	Errors    map[string]int64
}

// FairnessRun is one path's one case in one round.
type FairnessRun struct {
	Path  string `json:"path"`
	Case  string `json:"case"`
	Round int    `json:"round"`
	// AloneP99 is the first tenant's p99 when it runs alone.
	AloneP99 float64     `json:"alone_p99_ms"`
	Tenants  []TenantRun `json:"tenants"`
	// Jain is Jain's fairness index over the standard tenants' goodput
	// divided by their fair shares (1: each got its share).
	Jain float64 `json:"jain"`
	// GateWaited is the share of the calls infergate's gates sent that
	// waited for their turn while the tenants ran together (from
	// /api/v1/flow); -1 on a path without them.
	GateWaited float64 `json:"gate_waited"`
}

// FairnessResult is every run.
type FairnessResult struct {
	Config   FairnessConfig `json:"-"`
	Capacity float64        `json:"capacity_rps"`
	Runs     []FairnessRun  `json:"runs"`
	Notes    []string       `json:"notes,omitempty"`
}

// RunFairness runs bench fairness.
func RunFairness(ctx context.Context, cfg FairnessConfig) (*FairnessResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, cleanup, err := workDir("fairness", cfg.WorkDir, cfg.KeepWorkDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(cfg.Log, "bench: fairness: work dir %s\n", dir)
	sim, m, err := StartProcess(ctx, childproc.Spec{
		Name: "simserver", Path: cfg.Simserver, Args: []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"},
		LogPath: filepath.Join(dir, "simserver.log"), Ready: simserverLine,
	})
	if err != nil {
		return nil, fmt.Errorf("fairness: %w", err)
	}
	defer sim.Stop()
	simAddr := m[1]
	pl, err := load.NewPayload(load.KServe, "resnet50", []load.Tensor{{Name: "input", Datatype: "FP32", Shape: []int64{1, 64}}})
	if err != nil {
		return nil, fmt.Errorf("fairness: %w", err)
	}
	res := &FairnessResult{Config: cfg, Capacity: cfg.Capacity}
	var paths []Path
	flowAdmin := map[string]string{} // a path's admin address, for /api/v1/flow
	if cfg.Infergate != "" {
		args := append([]string{"--flow-control"}, cfg.InfergateArgs...)
		ig, listen, admin, err := startInfergate(ctx, cfg.Infergate, simAddr, filepath.Join(dir, "infergate.log"), args)
		if err != nil {
			return nil, fmt.Errorf("fairness: %w", err)
		}
		defer ig.Stop()
		paths = append(paths, Path{PathInfergateFlow, listen})
		flowAdmin[listen] = admin
		if cfg.NoFlow {
			ig, listen, _, err := startInfergate(ctx, cfg.Infergate, simAddr, filepath.Join(dir, "infergate-no-flow.log"), cfg.InfergateArgs)
			if err != nil {
				return nil, fmt.Errorf("fairness: %w", err)
			}
			defer ig.Stop()
			paths = append(paths, Path{PathInfergateNoFlow, listen})
		}
	}
	if res.Capacity == 0 {
		// A batched model serves more calls than one sent alone: its
		// capacity is measured through infergate, with callers enough
		// to fill batches; otherwise directly, as the model server's.
		target, callers, via := simAddr, 8, "direct"
		if batched(cfg.InfergateArgs) && len(paths) > 0 {
			target, callers, via = paths[len(paths)-1].Addr, 64, "through infergate, batched"
		}
		r, err := load.Run(ctx, load.Config{Label: "capacity", Target: target, Payload: pl, Concurrency: callers,
			Warmup: time.Second, Duration: 5 * time.Second, Timeout: 10 * time.Second})
		if err != nil {
			return nil, fmt.Errorf("fairness: capacity: %w", err)
		}
		res.Capacity = r.Throughput
		fmt.Fprintf(cfg.Log, "bench: fairness: capacity %.0f calls/s (closed loop, %d callers, %s)\n", res.Capacity, callers, via)
	}
	if cfg.HAProxy != "" {
		listen, err := FreeAddr()
		if err != nil {
			return nil, fmt.Errorf("fairness: %w", err)
		}
		hdir := filepath.Join(dir, "haproxy")
		if err := os.MkdirAll(hdir, 0o755); err != nil {
			return nil, fmt.Errorf("fairness: %w", err)
		}
		hp, err := StartHAProxy(ctx, cfg.HAProxy, HAProxyConfig{Dir: hdir, Listen: listen, Upstream: simAddr,
			Threads: cfg.HAProxyThreads, MaxConn: cfg.HAProxyMaxConn, PriorityHeader: grpcwire.HeaderPriority})
		if err != nil {
			return nil, fmt.Errorf("fairness: %w", err)
		}
		defer hp.Stop()
		paths = append(paths, Path{PathHAProxyPriority, listen})
	} else if cfg.HAProxySkipped != "" {
		res.Notes = append(res.Notes, "haproxy: skipped ("+cfg.HAProxySkipped+")")
	}
	if len(paths) == 0 {
		return nil, errors.New("fairness: no path to measure")
	}
	for round := range cfg.Rounds {
		for _, fc := range cfg.Cases {
			if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, fc.Name) {
				continue
			}
			for _, p := range paths {
				run, err := fairnessRun(ctx, cfg, res.Capacity, fc, p, flowAdmin[p.Addr], pl)
				if err != nil {
					return nil, fmt.Errorf("fairness: %s %s round %d: %w", p.Name, fc.Name, round+1, err)
				}
				run.Round = round + 1
				fmt.Fprintf(cfg.Log, "bench: fairness: round %d %-16s %-15s %s\n", run.Round, p.Name, fc.Name, run.line())
				res.Runs = append(res.Runs, run)
			}
		}
	}
	return res, nil
}

// fairnessRun measures one case on one path: the first tenant alone,
// then every tenant together.
func fairnessRun(ctx context.Context, cfg FairnessConfig, capacity float64, fc FairnessCase, p Path, admin string, pl *load.Payload) (FairnessRun, error) {
	run := FairnessRun{Path: p.Name, Case: fc.Name, GateWaited: -1}
	lc := func(t FairnessTenant) load.Config {
		return load.Config{Label: t.Name, Target: p.Addr, Payload: pl, Rate: t.Share * capacity, Arrival: load.Poisson,
			Seed: uint64(len(t.Name)*7919 + int(t.Share*1000)), MaxInFlight: cfg.Workers, Timeout: cfg.Timeout,
			Duration: cfg.Duration, Metadata: map[string]string{grpcwire.HeaderTenant: t.Name, grpcwire.HeaderPriority: t.Band}}
	}
	first := lc(fc.Tenants[0])
	first.Warmup = time.Second
	alone, err := load.Run(ctx, first)
	if err != nil {
		return run, err
	}
	run.AloneP99 = alone.Latency.P99
	results := make([]*load.Result, len(fc.Tenants))
	errs := make([]error, len(fc.Tenants))
	var sent0, waited0 uint64
	if admin != "" {
		sent0, waited0, _ = gateCounts(ctx, admin)
	}
	var wg sync.WaitGroup
	for i, t := range fc.Tenants {
		wg.Go(func() { results[i], errs[i] = load.Run(ctx, lc(t)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return run, err
	}
	if admin != "" {
		if sent, waited, err := gateCounts(ctx, admin); err == nil && sent > sent0 {
			run.GateWaited = float64(waited-waited0) / float64(sent-sent0)
		}
	}
	// The fair shares are of what was served (the model's capacity as
	// this run found it), less what the critical tenants took.
	demands := map[string]float64{}
	left := 0.0
	for _, r := range results {
		left += r.Throughput
	}
	for i, t := range fc.Tenants {
		r := results[i]
		tr := TenantRun{Name: t.Name, Band: t.Band, Offer: t.Share * capacity, Goodput: r.Throughput,
			P50: r.Latency.P50, P99: r.Latency.P99, Failed: r.Failed, Errors: r.Errors}
		if n := r.Completed + r.Failed; n > 0 {
			tr.Answered = float64(r.Completed) / float64(n)
		}
		if t.Band == "critical" {
			left -= min(tr.Goodput, left)
		} else {
			demands[t.Name] = tr.Offer
		}
		run.Tenants = append(run.Tenants, tr)
	}
	shares := maxMinFair(left, demands)
	var xs []float64
	for i := range run.Tenants {
		if s, ok := shares[run.Tenants[i].Name]; ok {
			run.Tenants[i].FairShare = s
			if s > 0 {
				xs = append(xs, run.Tenants[i].Goodput/s)
			}
		}
	}
	run.Jain = jain(xs)
	return run, nil
}

// gateCounts sums the calls infergate's gates sent and those of them
// that waited, from its /api/v1/flow.
func gateCounts(ctx context.Context, admin string) (sent, waited uint64, err error) {
	var doc struct {
		Gates []struct {
			Bands map[string]struct{ Sent, Waited uint64 }
		}
	}
	if err := getJSON(ctx, "http://"+admin+"/api/v1/flow", &doc); err != nil {
		return 0, 0, err
	}
	for _, g := range doc.Gates {
		for _, b := range g.Bands {
			sent += b.Sent
			waited += b.Waited
		}
	}
	return sent, waited, nil
}

// batched says whether infergate's arguments turn batching on.
func batched(args []string) bool {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--batching")
		if !ok || strings.HasPrefix(v, "-") { // --batching-models and the like
			continue
		}
		if v == "" && i+1 < len(args) {
			v = args[i+1]
		} else {
			v = strings.TrimPrefix(v, "=")
		}
		return v != "off" && v != "false"
	}
	return false
}

// maxMinFair splits capacity between demands: each gets what it asks or
// an equal share of what is left, whichever is less (water filling).
func maxMinFair(capacity float64, demands map[string]float64) map[string]float64 {
	out := map[string]float64{}
	names := make([]string, 0, len(demands))
	for n := range demands {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return demands[names[i]] < demands[names[j]] })
	left := capacity
	for i, n := range names {
		share := left / float64(len(names)-i)
		out[n] = min(demands[n], share)
		left -= out[n]
	}
	return out
}

// jain is Jain's fairness index of xs: 1 when all are equal, 1/n when one
// has everything.
func jain(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// line is a run on one line, for the log.
func (r FairnessRun) line() string {
	var parts []string
	for _, t := range r.Tenants {
		s := fmt.Sprintf("%s(%s) %.0f/%.0f calls/s p50 %.1f ms p99 %.0f ms answered %.1f%%", t.Name, t.Band, t.Goodput, t.Offer, t.P50, t.P99, 100*t.Answered)
		if t.FairShare > 0 {
			s += fmt.Sprintf(" share %.0f", t.FairShare)
		}
		if len(t.Errors) > 0 {
			s += fmt.Sprintf(" errors %v", t.Errors)
		}
		parts = append(parts, s)
	}
	line := fmt.Sprintf("%s; %s alone p99 %.0f ms; Jain %.3f", strings.Join(parts, "; "), r.Tenants[0].Name, r.AloneP99, r.Jain)
	if r.GateWaited >= 0 {
		line += fmt.Sprintf("; waited at the gate %.1f%%", 100*r.GateWaited)
	}
	return line
}

// Markdown is the report: per case and path, the medians over the
// rounds.
func (r *FairnessResult) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "## Fairness: one simserver resnet50 (1 slot, batching off, %.0f calls/s saturated), tenants in open loop (Poisson) with x-tenant and x-priority, %s per case, deadline %s; median [min..max] of %d interleaved rounds\n\n",
		r.Capacity, c.Duration, c.Timeout, c.Rounds)
	for _, fc := range c.Cases {
		if len(c.Only) > 0 && !slices.Contains(c.Only, fc.Name) {
			continue
		}
		var ts []string
		for _, t := range fc.Tenants {
			ts = append(ts, fmt.Sprintf("%s %s %.2gx", t.Name, t.Band, t.Share))
		}
		fmt.Fprintf(&b, "### %s: %s\n\n", fc.Name, strings.Join(ts, ", "))
		b.WriteString("| path | " + fc.Tenants[0].Name + " p99 alone / together (ms) | " + fc.Tenants[0].Name + " p50 together (ms) | " + fc.Tenants[0].Name + " answered |")
		for _, t := range fc.Tenants[1:] {
			fmt.Fprintf(&b, " %s goodput / fair share (calls/s) |", t.Name)
		}
		b.WriteString(" lower bands' share of answers | Jain | calls that waited at the gate |\n| --- | ---: | ---: | ---: |")
		b.WriteString(strings.Repeat(" ---: |", len(fc.Tenants)-1))
		b.WriteString(" ---: | ---: | ---: |\n")
		var order []string
		for _, run := range r.Runs {
			if run.Case == fc.Name && !slices.Contains(order, run.Path) {
				order = append(order, run.Path)
			}
		}
		for _, path := range order {
			var alone, together, p50, answered, jains, stdShare, waited []float64
			good := make([][]float64, len(fc.Tenants))
			share := make([]float64, len(fc.Tenants))
			for _, run := range r.Runs {
				if run.Case != fc.Name || run.Path != path {
					continue
				}
				alone, together = append(alone, run.AloneP99), append(together, run.Tenants[0].P99)
				p50 = append(p50, run.Tenants[0].P50)
				answered, jains = append(answered, 100*run.Tenants[0].Answered), append(jains, run.Jain)
				if run.GateWaited >= 0 {
					waited = append(waited, 100*run.GateWaited)
				}
				var ok, all float64
				for i, t := range run.Tenants {
					good[i] = append(good[i], t.Goodput)
					share[i] = t.FairShare
					if t.Band != "critical" {
						ok += t.Goodput
					}
					all += t.Goodput
				}
				if all > 0 {
					stdShare = append(stdShare, 100*ok/all)
				}
			}
			fmt.Fprintf(&b, "| %s | %s / %s | %s | %s%% |", path, spreadOf(alone).format(num("%.0f")), spreadOf(together).format(num("%.0f")),
				spreadOf(p50).format(num("%.2f")), spreadOf(answered).format(num("%.1f")))
			for i := range fc.Tenants[1:] {
				fmt.Fprintf(&b, " %s / %.0f |", spreadOf(good[i+1]).format(num("%.0f")), share[i+1])
			}
			w := "-"
			if len(waited) > 0 {
				w = spreadOf(waited).format(num("%.1f")) + "%"
			}
			fmt.Fprintf(&b, " %s%% | %s | %s |\n", spreadOf(stdShare).format(num("%.1f")), spreadOf(jains).format(num("%.3f")), w)
		}
		b.WriteString("\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}
