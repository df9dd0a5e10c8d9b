package scenario

import (
	"context"
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

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/childproc"
)

// Paths of bench balance: each balancer in front of the same replicas.
const (
	PathInfergatePool     = "infergate"
	PathInfergatePoolB    = "infergate-b"
	PathHAProxyLeastConn  = "haproxy-leastconn"
	PathNginxLeastConn    = "nginx-least_conn"
	PathHAProxyRoundRobin = "haproxy-roundrobin"
)

// BalanceConfig is one bench balance run: Replicas simservers of one
// model (5 ms + 0.25 ms a row, one slot, no long tail: about 190 calls/s
// each), an open loop of Rate calls/s, first healthy, then with one
// replica Slowdown times slower, through each balancer in turn, Rounds
// times interleaved.
type BalanceConfig struct {
	Simserver     string
	Infergate     string
	InfergateArgs []string
	// InfergateB, when set, is a second infergate binary (another
	// build), path infergate-b, measured in the same run.
	InfergateB   string
	Nginx        string
	NginxWorkers string
	// HAProxy is the haproxy binary ("" leaves its paths out;
	// HAProxySkipped says why in the report).
	HAProxy        string
	HAProxySkipped string
	HAProxyThreads int
	// RoundRobin adds HAProxy's roundrobin, the balancer that knows
	// nothing of load.
	RoundRobin bool

	Replicas int
	Rate     float64
	// Workers caps the calls in flight (the open loop's workers).
	Workers int
	Conns   int
	// Healthy and Slow are the two phases' lengths; Slowdown the slow
	// replica's factor.
	Healthy, Slow time.Duration
	Slowdown      float64
	// KillRate and KillFor are the third phase: an open loop of
	// KillRate calls/s for KillFor, replica 2 killed (SIGKILL) a third
	// of the way in and started again after; KillFor 0 leaves it out.
	KillRate float64
	KillFor  time.Duration
	Rounds   int
	Timeout  time.Duration

	WorkDir     string
	KeepWorkDir bool
	Log         io.Writer
}

// Validate fills the defaults: the setup.
func (c *BalanceConfig) Validate() error {
	if c.Replicas == 0 {
		c.Replicas = 4
	}
	if c.Rate == 0 {
		c.Rate = 400
	}
	if c.Workers == 0 {
		c.Workers = 64
	}
	if c.Conns == 0 {
		c.Conns = 1
	}
	if c.Healthy == 0 {
		c.Healthy = 8 * time.Second
	}
	if c.Slow == 0 {
		c.Slow = 15 * time.Second
	}
	if c.Slowdown == 0 {
		c.Slowdown = 4
	}
	if c.Rounds == 0 {
		c.Rounds = 2
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.KillRate == 0 {
		c.KillRate = 200
	}
	if c.HAProxyThreads == 0 {
		c.HAProxyThreads = 2
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	if c.Replicas < 2 {
		errs = append(errs, fmt.Errorf("balance: replicas: at least 2, got %d", c.Replicas))
	}
	if _, err := os.Stat(c.Simserver); err != nil {
		errs = append(errs, fmt.Errorf("balance: simserver %q: %w", c.Simserver, errMissingBinary))
	}
	return errors.Join(errs...)
}

// BalanceRun is one path's run in one round.
type BalanceRun struct {
	Path  string `json:"path"`
	Round int    `json:"round"`
	// HealthyP99 and SlowP99 are the phases' p99 latency in ms, from
	// each call's intended send time.
	HealthyP99 float64 `json:"healthy_p99_ms"`
	// HealthyP50 is the healthy phase's p50, in ms.
	HealthyP50 float64 `json:"healthy_p50_ms"`
	// HealthyQueue is the healthy phase's mean time a call waited in a
	// replica's queue (the replicas' own counters), in ms: what the
	// pick made calls wait behind others.
	HealthyQueue float64 `json:"healthy_queue_ms"`
	SlowP99      float64 `json:"slow_p99_ms"`
	// SlowShare is the share of the slow phase's calls the slow replica
	// answered (read from the replicas' own counters).
	SlowShare float64 `json:"slow_share"`
	Calls     int64   `json:"calls"`
	Failed    int64   `json:"failed"`
	// KillCalls and KillFailed are the kill phase's calls and failures.
	KillCalls  int64 `json:"kill_calls,omitempty"`
	KillFailed int64 `json:"kill_failed,omitempty"`
}

// BalanceResult is every run of a bench balance.
type BalanceResult struct {
	Config BalanceConfig `json:"-"`
	Runs   []BalanceRun  `json:"runs"`
	Notes  []string      `json:"notes,omitempty"`
}

// balanceModels is the replicas' one model, as the issue measured it.
const balanceModels = `models:
  - name: resnet50
    kind: classifier
    platform: tensorrt_plan
    protocols: [kserve]
    max_batch: 64
    slots: 1
    inputs: [{name: input, datatype: FP32, dims: [64]}]
    outputs: [{name: probs, datatype: FP32, dims: [10]}]
    latency: {base_ms: 5, per_item_ms: 0.25}
`

// RunBalance runs bench balance.
func RunBalance(ctx context.Context, cfg BalanceConfig) (*BalanceResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, cleanup, err := workDir("balance", cfg.WorkDir, cfg.KeepWorkDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(cfg.Log, "bench: balance: work dir %s\n", dir)
	modelsFile := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(modelsFile, []byte(balanceModels), 0o644); err != nil {
		return nil, fmt.Errorf("balance: %w", err)
	}
	var grpcs, admins []string
	sims := make([]*childproc.Proc, cfg.Replicas)
	defer func() {
		for _, p := range sims {
			p.Stop()
		}
	}()
	startSim := func(i int, listen, admin string) error {
		sim, m, err := StartProcess(ctx, childproc.Spec{
			Name: fmt.Sprintf("simserver %d", i), Path: cfg.Simserver,
			Args:    []string{"--listen", listen, "--admin", admin, "--config", modelsFile},
			LogPath: filepath.Join(dir, fmt.Sprintf("simserver-%d.log", i)), Ready: simserverLine,
		})
		if err != nil {
			return fmt.Errorf("balance: %w", err)
		}
		sims[i] = sim
		if len(grpcs) == i {
			grpcs, admins = append(grpcs, m[1]), append(admins, m[2])
		}
		return nil
	}
	for i := range cfg.Replicas {
		if err := startSim(i, "127.0.0.1:0", "127.0.0.1:0"); err != nil {
			return nil, err
		}
	}
	// kill is the kill phase's replica: killed, then started again at
	// the same addresses.
	kill := func() { sims[2].Kill() }
	restart := func() error { return startSim(2, grpcs[2], admins[2]) }
	res := &BalanceResult{Config: cfg}
	var paths []Path
	if cfg.Infergate != "" {
		ig, listen, _, err := startInfergate(ctx, cfg.Infergate, strings.Join(grpcs, ","), filepath.Join(dir, "infergate.log"), cfg.InfergateArgs)
		if err != nil {
			return nil, fmt.Errorf("balance: %w", err)
		}
		defer ig.Stop()
		paths = append(paths, Path{PathInfergatePool, listen})
		if cfg.InfergateB != "" {
			igb, listen, _, err := startInfergate(ctx, cfg.InfergateB, strings.Join(grpcs, ","), filepath.Join(dir, "infergate-b.log"), cfg.InfergateArgs)
			if err != nil {
				return nil, fmt.Errorf("balance: %w", err)
			}
			defer igb.Stop()
			paths = append(paths, Path{PathInfergatePoolB, listen})
		}
	}
	if cfg.HAProxy != "" {
		modes := []struct{ name, balance string }{{PathHAProxyLeastConn, "leastconn"}}
		if cfg.RoundRobin {
			modes = append(modes, struct{ name, balance string }{PathHAProxyRoundRobin, "roundrobin"})
		}
		for _, m := range modes {
			listen, err := FreeAddr()
			if err != nil {
				return nil, fmt.Errorf("balance: %w", err)
			}
			hdir := filepath.Join(dir, m.name)
			if err := os.MkdirAll(hdir, 0o755); err != nil {
				return nil, fmt.Errorf("balance: %w", err)
			}
			hp, err := StartHAProxy(ctx, cfg.HAProxy, HAProxyConfig{Dir: hdir, Listen: listen, Servers: grpcs,
				Balance: m.balance, Threads: cfg.HAProxyThreads})
			if err != nil {
				return nil, fmt.Errorf("balance: %w", err)
			}
			defer hp.Stop()
			paths = append(paths, Path{m.name, listen})
		}
	} else if cfg.HAProxySkipped != "" {
		res.Notes = append(res.Notes, "haproxy: skipped ("+cfg.HAProxySkipped+")")
	}
	if cfg.Nginx != "" {
		listen, err := FreeAddr()
		if err != nil {
			return nil, fmt.Errorf("balance: %w", err)
		}
		ndir := filepath.Join(dir, "nginx")
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			return nil, fmt.Errorf("balance: %w", err)
		}
		ng, err := StartNginx(ctx, cfg.Nginx, NginxConfig{Dir: ndir, Listen: listen, Servers: grpcs,
			Balance: "least_conn", Workers: cfg.NginxWorkers})
		if err != nil {
			return nil, fmt.Errorf("balance: %w", err)
		}
		defer ng.Stop()
		paths = append(paths, Path{PathNginxLeastConn, listen})
	}
	if len(paths) == 0 {
		return nil, errors.New("balance: no path to measure")
	}
	pl, err := load.NewPayload(load.KServe, "resnet50", []load.Tensor{{Name: "input", Datatype: "FP32", Shape: []int64{1, 64}}})
	if err != nil {
		return nil, fmt.Errorf("balance: %w", err)
	}
	for round := range cfg.Rounds {
		for _, p := range paths {
			run, err := balanceRun(ctx, cfg, p, pl, admins, kill, restart)
			if err != nil {
				return nil, fmt.Errorf("balance: %s round %d: %w", p.Name, round+1, err)
			}
			run.Round = round + 1
			fmt.Fprintf(cfg.Log, "bench: balance: round %d %-20s healthy p50 %.2f ms, queue %.3f ms a call; healthy p99 %.1f ms, slow p99 %.1f ms, %.2f%% on the slow replica, %d failed; a replica killed: %d of %d failed\n",
				run.Round, p.Name, run.HealthyP50, run.HealthyQueue, run.HealthyP99, run.SlowP99, 100*run.SlowShare, run.Failed, run.KillFailed, run.KillCalls)
			res.Runs = append(res.Runs, run)
		}
	}
	return res, nil
}

// balanceRun measures one path: the healthy phase, then the slow one.
func balanceRun(ctx context.Context, cfg BalanceConfig, p Path, pl *load.Payload, admins []string, kill func(), restart func() error) (BalanceRun, error) {
	run := BalanceRun{Path: p.Name}
	faults := simFaults{client: http.DefaultClient}
	for _, a := range admins {
		if err := faults.do(ctx, http.MethodDelete, a, nil); err != nil {
			return run, err
		}
	}
	lc := load.Config{Label: p.Name, Target: p.Addr, Payload: pl, Rate: cfg.Rate, MaxInFlight: cfg.Workers,
		Conns: cfg.Conns, Timeout: cfg.Timeout, Warmup: time.Second, Duration: cfg.Healthy}
	// The warmup's calls are in the replicas' counters too: a second of
	// 64 in the healthy phase's mean queue time.
	qBefore, err := replicaCounter(ctx, admins, "nv_inference_queue_duration_us")
	if err != nil {
		return run, err
	}
	nBefore, err := successes(ctx, admins)
	if err != nil {
		return run, err
	}
	healthy, err := load.Run(ctx, lc)
	if err != nil {
		return run, err
	}
	qAfter, err := replicaCounter(ctx, admins, "nv_inference_queue_duration_us")
	if err != nil {
		return run, err
	}
	nAfter, err := successes(ctx, admins)
	if err != nil {
		return run, err
	}
	var q, n float64
	for i := range qAfter {
		q += qAfter[i] - qBefore[i]
		n += nAfter[i] - nBefore[i]
	}
	if n > 0 {
		run.HealthyQueue = q / n / 1000
	}
	run.HealthyP50 = healthy.Latency.P50
	if err := faults.do(ctx, http.MethodPost, admins[1], map[string]any{"model": "resnet50", "slowdown": cfg.Slowdown}); err != nil {
		return run, err
	}
	before, err := successes(ctx, admins)
	if err != nil {
		return run, err
	}
	lc.Duration, lc.Warmup = cfg.Slow, 0
	slow, err := load.Run(ctx, lc)
	if err != nil {
		return run, err
	}
	after, err := successes(ctx, admins)
	if err != nil {
		return run, err
	}
	if err := faults.do(ctx, http.MethodDelete, admins[1], nil); err != nil {
		return run, err
	}
	var total float64
	for i := range after {
		total += after[i] - before[i]
	}
	if total > 0 {
		run.SlowShare = (after[1] - before[1]) / total
	}
	run.HealthyP99, run.SlowP99 = healthy.Latency.P99, slow.Latency.P99
	run.Calls = healthy.Completed + healthy.Failed + slow.Completed + slow.Failed
	run.Failed = healthy.Failed + slow.Failed
	if cfg.KillFor > 0 {
		lc.Rate, lc.Duration = cfg.KillRate, cfg.KillFor
		t := time.AfterFunc(cfg.KillFor/3, kill)
		killed, err := load.Run(ctx, lc)
		t.Stop()
		if err != nil {
			return run, err
		}
		if err := restart(); err != nil {
			return run, err
		}
		run.KillCalls, run.KillFailed = killed.Completed+killed.Failed, killed.Failed
		// The replica back: the next path starts with four.
		time.Sleep(2 * time.Second)
	}
	return run, nil
}

// successes reads each replica's count of successful inference calls.
func successes(ctx context.Context, admins []string) ([]float64, error) {
	return replicaCounter(ctx, admins, "nv_inference_request_success")
}

// replicaCounter reads each replica's counter name, summed over its labels.
func replicaCounter(ctx context.Context, admins []string, name string) ([]float64, error) {
	out := make([]float64, len(admins))
	for i, a := range admins {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/metrics", nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("scrape %s: %w", a, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", a, err)
		}
		if f := fams[name]; f != nil {
			for _, m := range f.GetMetric() {
				out[i] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

// Markdown is the report: per path, the medians over the rounds.
func (r *BalanceResult) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "## Replica balancing: %d simserver replicas of resnet50 (5 ms + 0.25 ms a row, 1 slot, no long tail), open loop %.0f calls/s, at most %d in flight, %d connection(s); healthy %s, then replica 1 %gx slower %s; median [min..max] of %d interleaved rounds\n\n",
		c.Replicas, c.Rate, c.Workers, c.Conns, c.Healthy, c.Slowdown, c.Slow, c.Rounds)
	b.WriteString("| balancer | healthy p50 (ms) | healthy: replica queue a call (ms) | healthy p99 (ms) | p99 with one slow replica (ms) | calls on the slow replica | failed |")
	if c.KillFor > 0 {
		fmt.Fprintf(&b, " a replica killed at %.0f calls/s: failed |", c.KillRate)
	}
	b.WriteString("\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	if c.KillFor > 0 {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	var order []string
	for _, run := range r.Runs {
		if !slices.Contains(order, run.Path) {
			order = append(order, run.Path)
		}
	}
	for _, path := range order {
		var h50, hq, h, s, share []float64
		var failed, killCalls, killFailed int64
		for _, run := range r.Runs {
			if run.Path == path {
				h50, hq = append(h50, run.HealthyP50), append(hq, run.HealthyQueue)
				h, s, share = append(h, run.HealthyP99), append(s, run.SlowP99), append(share, 100*run.SlowShare)
				failed += run.Failed
				killCalls, killFailed = killCalls+run.KillCalls, killFailed+run.KillFailed
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s%% | %d |", path, spreadOf(h50).format(num("%.2f")), spreadOf(hq).format(num("%.3f")), spreadOf(h).format(num("%.1f")), spreadOf(s).format(num("%.1f")), spreadOf(share).format(num("%.2f")), failed)
		if c.KillFor > 0 {
			pct := 0.0
			if killCalls > 0 {
				pct = 100 * float64(killFailed) / float64(killCalls)
			}
			fmt.Fprintf(&b, " %d of %d (%.2f%%) |", killFailed, killCalls, pct)
		}
		b.WriteString("\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n- %s", n)
	}
	b.WriteString("\n")
	return b.String()
}

// num formats a value with f.
func num(f string) func(float64) string {
	return func(v float64) string { return fmt.Sprintf(f, v) }
}
