package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/childproc"
)

// batchTarget is a running model path for the batching scenario: infergate's
// gRPC address and, when known, its admin address for /metrics.
type batchTarget struct {
	GRPC  string
	Admin string
	// Direct is the model server's own gRPC address, when known: the
	// physical limit is measured there.
	Direct string
}

// RunBatching measures the unbatched capacity, sweeps static
// configurations (unless cfg.Static is set), then runs every reported
// configuration over cfg.Loads, each with a fresh simserver and infergate,
// and returns the report. The processes are stopped before it returns.
func RunBatching(ctx context.Context, cfg BatchingConfig) (*BatchingReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir := cfg.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "infergate-batching-")
		if err != nil {
			return nil, fmt.Errorf("batching: work dir: %w", err)
		}
		dir = d
		if !cfg.KeepWorkDir {
			defer os.RemoveAll(dir)
		}
	}
	fmt.Fprintf(cfg.Log, "bench: batching: work dir %s\n", dir)
	r, err := newBatchRunner(cfg)
	if err != nil {
		return nil, err
	}
	r.start = func(ctx context.Context, s BatchSetting, tag string) (batchTarget, func(), error) {
		return startBatchPair(ctx, cfg, dir, s, tag)
	}
	return r.run(ctx)
}

// batchRunner carries one batching scenario run.
type batchRunner struct {
	cfg     BatchingConfig
	payload *load.Payload
	// start brings up a fresh model path configured with s; the function
	// it returns stops it.
	start func(ctx context.Context, s BatchSetting, tag string) (batchTarget, func(), error)
	// scrape reads the batching counters; nil or an empty admin address
	// means none are read.
	scrape func(ctx context.Context, admin, model string) (BatchCounters, error)
}

func newBatchRunner(cfg BatchingConfig) (*batchRunner, error) {
	inputs, _ := load.ModelDefaults(cfg.Model)
	pl, err := load.NewPayload(load.KServe, cfg.Model, inputs)
	if err != nil {
		return nil, fmt.Errorf("batching: payload: %w", err)
	}
	return &batchRunner{cfg: cfg, payload: pl, scrape: ScrapeBatchCounters}, nil
}

// run is the whole scenario once r.start is set.
func (r *batchRunner) run(ctx context.Context) (*BatchingReport, error) {
	cfg := r.cfg
	rep := newBatchingReport(cfg)
	capacity, err := r.measureCapacity(ctx)
	if err != nil {
		return nil, err
	}
	rep.Capacity = capacity
	statics := cfg.Static
	if statics == nil {
		var sweep []SweepEntry
		statics, sweep, err = r.sweepStatic(ctx, capacity.Throughput)
		if err != nil {
			return nil, err
		}
		rep.Sweep = sweep
	}
	settings := append([]BatchSetting{OffSetting()}, statics...)
	settings = append(settings, AdaptiveSetting(cfg.SLO, cfg.AdaptiveMaxSize, !cfg.AdaptiveNoShed))
	for _, s := range settings {
		pts, err := r.runSetting(ctx, s, "run", cfg.Loads, capacity.Throughput, cfg.Duration, cfg.Warmup, true)
		if err != nil {
			return nil, err
		}
		rep.Configs = append(rep.Configs, s)
		rep.Points = append(rep.Points, pts...)
	}
	rep.Summarise()
	return rep, nil
}

// measureCapacity finds the unbatched capacity: the best closed-loop
// throughput through infergate with batching off.
func (r *batchRunner) measureCapacity(ctx context.Context) (Capacity, error) {
	cfg := r.cfg
	t, stop, err := r.start(ctx, OffSetting(), "capacity")
	if err != nil {
		return Capacity{}, err
	}
	defer stop()
	if err := probe(ctx, Path{Name: "capacity", Addr: t.GRPC}, r.payload); err != nil {
		return Capacity{}, fmt.Errorf("batching: capacity: %w", err)
	}
	var c Capacity
	for _, n := range cfg.CapacityConcurrency {
		res, err := load.Run(ctx, load.Config{
			Label: fmt.Sprintf("capacity c=%d", n), Target: t.GRPC, Payload: r.payload,
			Concurrency: n, Duration: cfg.CapacityDuration, Warmup: cfg.CapacityDuration / 4,
			Timeout: cfg.Timeout, Conns: cfg.Conns,
		})
		if err != nil {
			return Capacity{}, fmt.Errorf("batching: capacity c=%d: %w", n, err)
		}
		run := CapacityRun{Concurrency: n, Throughput: res.Throughput, P50: res.Latency.P50, P99: res.Latency.P99, Failed: res.Failed}
		c.Runs = append(c.Runs, run)
		if res.Throughput > c.Throughput {
			c.Throughput, c.Concurrency = res.Throughput, n
		}
		fmt.Fprintf(cfg.Log, "bench: batching: capacity c=%d %7.1f rps p50 %s ms p99 %s ms failed %d\n",
			n, res.Throughput, fmtMs(res.Latency.P50), fmtMs(res.Latency.P99), res.Failed)
		if err := ctx.Err(); err != nil {
			return Capacity{}, fmt.Errorf("batching: %w", err)
		}
	}
	if c.Throughput <= 0 {
		return Capacity{}, errors.New("batching: capacity: no request completed with batching off")
	}
	if err := r.measurePhysical(ctx, t, &c); err != nil {
		return Capacity{}, err
	}
	return c, nil
}

// measurePhysical finds the physical limit: the model's best batch
// throughput, in rows per second, closed loop straight to the model
// server with requests of AdaptiveMaxSize rows (two at a time, so an
// execution slot is never idle waiting for the next one). Nothing is
// measured when the model server's address is not known.
func (r *batchRunner) measurePhysical(ctx context.Context, t batchTarget, c *Capacity) error {
	if t.Direct == "" {
		return nil
	}
	rows := r.cfg.AdaptiveMaxSize
	inputs, _ := load.ModelDefaults(r.cfg.Model)
	for i := range inputs {
		inputs[i].Shape = append([]int64{int64(rows)}, inputs[i].Shape[1:]...)
	}
	pl, err := load.NewPayload(load.KServe, r.cfg.Model, inputs)
	if err != nil {
		return fmt.Errorf("batching: physical limit: payload: %w", err)
	}
	res, err := load.Run(ctx, load.Config{
		Label: fmt.Sprintf("physical limit, %d rows", rows), Target: t.Direct, Payload: pl,
		Concurrency: 2, Duration: r.cfg.CapacityDuration, Warmup: r.cfg.CapacityDuration / 4,
		Timeout: r.cfg.Timeout, Conns: 1,
	})
	if err != nil {
		return fmt.Errorf("batching: physical limit: %w", err)
	}
	c.PhysicalLimit, c.PhysicalBatch = res.Throughput*float64(rows), rows
	fmt.Fprintf(r.cfg.Log, "bench: batching: physical limit %7.1f rows/s (batches of %d straight to the model server, p50 %s ms, failed %d)\n",
		c.PhysicalLimit, rows, fmtMs(res.Latency.P50), res.Failed)
	return nil
}

// sweepStatic runs every static candidate at the sweep loads and returns
// the three static configurations to report: the best, Triton's default
// and a latency-heavy one.
func (r *batchRunner) sweepStatic(ctx context.Context, capacity float64) ([]BatchSetting, []SweepEntry, error) {
	cfg := r.cfg
	var entries []SweepEntry
	for _, size := range cfg.SweepSizes {
		for _, delay := range cfg.SweepDelays {
			s := StaticSetting(size, delay)
			pts, err := r.runSetting(ctx, s, "sweep", cfg.SweepLoads, capacity, cfg.SweepDuration, cfg.SweepWarmup, false)
			if err != nil {
				return nil, nil, err
			}
			entries = append(entries, newSweepEntry(s, pts))
		}
	}
	best := pickBest(entries)
	entries[best].Chosen = true
	return reportedStatics(entries[best].Setting, cfg.SweepDelays), entries, nil
}

// runSetting starts a fresh model path with s and measures it at each
// load in turn, stopping early once it is saturated.
func (r *batchRunner) runSetting(ctx context.Context, s BatchSetting, phase string, loads []float64, capacity float64,
	dur, warmup time.Duration, stretch bool) ([]BatchPoint, error) {
	t, stop, err := r.start(ctx, s, phase+"-"+fileTag(s.Name))
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := probe(ctx, Path{Name: s.Name, Addr: t.GRPC}, r.payload); err != nil {
		return nil, fmt.Errorf("batching: %s: %w", s.Name, err)
	}
	var pts []BatchPoint
	saturated := 0
	for _, ld := range loads {
		if saturated >= r.cfg.SaturatedRuns {
			pts = append(pts, BatchPoint{Config: s.Name, Load: ld, Offered: ld * capacity, Skipped: true, Saturated: true})
			continue
		}
		d := dur
		if stretch {
			d = stretchDuration(dur, ld*capacity, r.cfg.MinRequests)
		}
		p, err := r.measurePoint(ctx, t, s, ld, ld*capacity, d, warmup)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(r.cfg.Log, "bench: batching: %-5s %-16s load %5.2f %7.1f/s tput %7.1f good %7.1f p99 %7s ms batch %5.2f failed %d%s\n",
			phase, s.Name, ld, p.Offered, p.Throughput, p.Goodput, fmtMs(p.P99), p.MeanBatch, p.Failed, satMark(p.Saturated))
		pts = append(pts, p)
		if p.Saturated {
			saturated++
		} else {
			saturated = 0
		}
	}
	return pts, nil
}

// measurePoint runs one open-loop Poisson point: a warmup run, a scrape,
// the measured run and another scrape for the mean batch size.
func (r *batchRunner) measurePoint(ctx context.Context, t batchTarget, s BatchSetting, ld, rate float64, dur, warmup time.Duration) (BatchPoint, error) {
	base := load.Config{
		Target: t.GRPC, Payload: r.payload, Rate: rate, Arrival: load.Poisson,
		Timeout: r.cfg.Timeout, Conns: r.cfg.Conns,
	}
	label := fmt.Sprintf("%s@%g", s.Name, ld)
	if warmup > 0 {
		// A separate run, so that the counters scraped next cover the
		// measured window only; the batcher keeps what it learnt.
		w := base
		w.Label, w.Duration, w.Seed = label+"/warmup", warmup, 2
		if _, err := load.Run(ctx, w); err != nil {
			return BatchPoint{}, fmt.Errorf("batching: %s warmup: %w", label, err)
		}
	}
	before, err := r.counters(ctx, t)
	if err != nil {
		return BatchPoint{}, err
	}
	m := base
	// Seed 1 for every configuration: each one sees the same arrivals.
	m.Label, m.Duration, m.Seed = label, dur, 1
	res, err := load.Run(ctx, m)
	if err != nil {
		return BatchPoint{}, fmt.Errorf("batching: %s: %w", label, err)
	}
	after, err := r.counters(ctx, t)
	if err != nil {
		return BatchPoint{}, err
	}
	if err := ctx.Err(); err != nil {
		return BatchPoint{}, fmt.Errorf("batching: %w", err)
	}
	return newBatchPoint(s, ld, res, after.Sub(before), r.cfg.SLO), nil
}

// counters scrapes the batching counters when t has an admin address.
func (r *batchRunner) counters(ctx context.Context, t batchTarget) (BatchCounters, error) {
	if t.Admin == "" || r.scrape == nil {
		return BatchCounters{}, nil
	}
	c, err := r.scrape(ctx, t.Admin, r.cfg.Model)
	if err != nil {
		return BatchCounters{}, fmt.Errorf("batching: %w", err)
	}
	return c, nil
}

// stretchDuration lengthens d so that about minRequests are sent at rate,
// up to 3 × d.
func stretchDuration(d time.Duration, rate float64, minRequests int) time.Duration {
	if minRequests <= 0 || rate <= 0 {
		return d
	}
	need := time.Duration(float64(minRequests) / rate * float64(time.Second))
	return min(max(d, need), 3*d)
}

// startBatchPair starts a fresh simserver and an infergate in front of it
// configured with s. A fresh simserver per configuration means each one
// starts from the same seeded long-tail draws and an empty queue.
func startBatchPair(ctx context.Context, cfg BatchingConfig, dir string, s BatchSetting, tag string) (batchTarget, func(), error) {
	sim, m, err := StartProcess(ctx, childproc.Spec{
		Name: "simserver", Path: cfg.Simserver,
		Args:    append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, cfg.SimserverArgs...),
		LogPath: filepath.Join(dir, tag+"-simserver.log"), Ready: simserverLine,
	})
	if err != nil {
		return batchTarget{}, nil, fmt.Errorf("batching: %s: %w", s.Name, err)
	}
	args := append(slices.Clone(cfg.InfergateArgs), s.Args(cfg.Model)...)
	ig, listen, admin, err := startInfergate(ctx, cfg.Infergate, m[1], filepath.Join(dir, tag+"-infergate.log"), args)
	if err != nil {
		sim.Stop()
		return batchTarget{}, nil, fmt.Errorf("batching: %s (%s): %w", s.Name, strings.Join(args, " "), err)
	}
	fmt.Fprintf(cfg.Log, "bench: batching: %s: infergate pid %d grpc=%s admin=%s %s\n",
		tag, ig.Pid(), listen, admin, strings.Join(s.Args(cfg.Model), " "))
	return batchTarget{GRPC: listen, Admin: admin, Direct: m[1]}, func() { ig.Stop(); sim.Stop() }, nil
}

// fileTag turns a configuration name into a file name part.
func fileTag(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, name)
}

func satMark(saturated bool) string {
	if saturated {
		return " SATURATED"
	}
	return ""
}
