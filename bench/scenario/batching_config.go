package scenario

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/infergate/infergate/bench/load"
)

// Defaults of BatchingConfig, applied by Validate to zero fields.
var (
	DefaultBatchingLoads = []float64{0.1, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 4, 8, 12, 16}
	DefaultSweepSizes    = []int{8, 16, 32, 64}
	DefaultSweepDelays   = []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond}
	DefaultSweepLoads    = []float64{4, 8, 12}
	DefaultCapacityConc  = []int{1, 2, 3, 4}
)

// BatchingConfig configures RunBatching. Zero values are documented
// defaults.
type BatchingConfig struct {
	// Simserver and Infergate are the binaries; both required.
	Simserver, Infergate string
	// InfergateArgs are extra infergate arguments, given before the
	// batching flags.
	InfergateArgs []string
	// SimserverArgs are extra simserver arguments, e.g. "--config" with a
	// models file that changes resnet50's latency profile.
	SimserverArgs []string

	// Model is the batched model; empty means "resnet50". Requests carry
	// one item, with the model's known input (load.ModelDefaults).
	Model string
	// SLO is the latency a request must meet to count as goodput, and the
	// adaptive batcher's target; zero means 50 ms.
	SLO time.Duration
	// Loads are the offered loads as fractions of the measured unbatched
	// capacity; nil means DefaultBatchingLoads.
	Loads []float64
	// Duration is the measured time per point; zero means 5 s.
	Duration time.Duration
	// Warmup precedes each point at the same rate, unrecorded; zero means
	// 1 s, negative means none.
	Warmup time.Duration
	// MinRequests lengthens low-load points so they send about this many
	// requests, up to 3 × Duration, because a p99 of 100 requests is one
	// request; zero means 300, negative means never.
	MinRequests int
	// Timeout bounds each request; zero means 20 × SLO but at least 1 s. A
	// request that times out is far outside the SLO either way, and a
	// short timeout keeps overloaded points from draining for long.
	Timeout time.Duration
	// Conns is the number of client connections; zero means 2.
	Conns int
	// SaturatedRuns is how many loads in a row with goodput under half the
	// offered rate end a configuration's sweep; zero means 2.
	SaturatedRuns int

	// CapacityConcurrency are the closed-loop concurrencies, batching off,
	// whose best throughput is the unbatched capacity; nil means 1..4.
	CapacityConcurrency []int
	// CapacityDuration is the length of each capacity run; zero means
	// half of Duration (at least 500 ms).
	CapacityDuration time.Duration

	// Static are the static configurations reported; nil means sweep
	// SweepSizes × SweepDelays and report the best, Triton's default
	// (max size 64, no delay) and a latency-heavy one (32 / 10 ms).
	Static []BatchSetting
	// SweepSizes and SweepDelays span the sweep grid; nil means
	// DefaultSweepSizes and DefaultSweepDelays.
	SweepSizes  []int
	SweepDelays []time.Duration
	// SweepLoads are the loads each sweep candidate runs at (fractions of
	// capacity); nil means DefaultSweepLoads. The best candidate has the
	// highest goodput summed over them.
	SweepLoads []float64
	// SweepDuration and SweepWarmup time each sweep point; zero means half
	// of Duration and of Warmup.
	SweepDuration, SweepWarmup time.Duration

	// AdaptiveMaxSize is the adaptive batcher's --batch-max-size; zero
	// means 64.
	AdaptiveMaxSize int
	// AdaptiveNoShed runs adaptive without --batch-shed: every request is
	// sent, the late ones too, so p99 under overload is no longer bounded
	// by the SLO.
	AdaptiveNoShed bool

	// WorkDir holds the process logs; empty means a new temporary folder,
	// removed afterwards unless KeepWorkDir is set.
	WorkDir     string
	KeepWorkDir bool
	// Log receives progress lines; nil means none.
	Log io.Writer
}

// Validate fills defaults and reports every problem, joined.
func (c *BatchingConfig) Validate() error {
	if c.Model == "" {
		c.Model = "resnet50"
	}
	if c.SLO == 0 {
		c.SLO = 50 * time.Millisecond
	}
	if c.Loads == nil {
		c.Loads = DefaultBatchingLoads
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.Warmup == 0 {
		c.Warmup = time.Second
	} else if c.Warmup < 0 {
		c.Warmup = 0
	}
	if c.MinRequests == 0 {
		c.MinRequests = 300
	} else if c.MinRequests < 0 {
		c.MinRequests = 0
	}
	if c.Timeout == 0 {
		c.Timeout = max(20*c.SLO, time.Second)
	}
	if c.Conns == 0 {
		c.Conns = 2
	}
	if c.SaturatedRuns == 0 {
		c.SaturatedRuns = 2
	}
	if c.CapacityConcurrency == nil {
		c.CapacityConcurrency = DefaultCapacityConc
	}
	if c.CapacityDuration == 0 {
		c.CapacityDuration = max(c.Duration/2, 500*time.Millisecond)
	}
	if c.SweepSizes == nil {
		c.SweepSizes = DefaultSweepSizes
	}
	if c.SweepDelays == nil {
		c.SweepDelays = DefaultSweepDelays
	}
	if c.SweepLoads == nil {
		c.SweepLoads = DefaultSweepLoads
	}
	if c.SweepDuration == 0 {
		c.SweepDuration = c.Duration / 2
	}
	if c.SweepWarmup == 0 {
		c.SweepWarmup = c.Warmup / 2
	}
	if c.AdaptiveMaxSize == 0 {
		c.AdaptiveMaxSize = 64
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("batching: "+format, args...)) }
	if c.SLO < 0 {
		bad("slo %s: must be positive", c.SLO)
	}
	if c.Duration < 0 || c.SweepDuration < 0 || c.CapacityDuration < 0 || c.SweepWarmup < 0 {
		bad("durations must be positive")
	}
	if c.Timeout < 0 {
		bad("timeout %s: must be positive", c.Timeout)
	}
	if c.Conns < 0 {
		bad("conns %d: must be positive", c.Conns)
	}
	if c.SaturatedRuns < 0 {
		bad("saturated runs %d: must be positive", c.SaturatedRuns)
	}
	for _, v := range append(append([]float64{}, c.Loads...), c.SweepLoads...) {
		if !(v > 0) {
			bad("load %g: must be a positive fraction of capacity", v)
		}
	}
	if len(c.Loads) == 0 {
		bad("loads: at least one is needed")
	}
	if len(c.CapacityConcurrency) == 0 {
		bad("capacity concurrency: at least one is needed")
	}
	for _, n := range c.CapacityConcurrency {
		if n < 1 {
			bad("capacity concurrency %d: must be positive", n)
		}
	}
	if c.Static == nil && (len(c.SweepSizes) == 0 || len(c.SweepDelays) == 0 || len(c.SweepLoads) == 0) {
		bad("sweep: sizes, delays and loads are needed when no static configuration is given")
	}
	for _, s := range c.Static {
		if s.Mode != BatchStatic || s.MaxSize < 1 || s.MaxDelay < 0 {
			bad("static %q: needs mode static, a positive max size and a delay >= 0", s.Name)
		}
	}
	if c.AdaptiveMaxSize < 1 {
		bad("adaptive max size %d: must be positive", c.AdaptiveMaxSize)
	}
	if _, known := load.ModelDefaults(c.Model); !known {
		bad("model %q: no known input shape (want resnet50 or mobilenet_v3)", c.Model)
	}
	for _, b := range []struct{ name, path string }{{"simserver", c.Simserver}, {"infergate", c.Infergate}} {
		if b.path == "" {
			bad("%s: binary path required", b.name)
		} else if _, err := os.Stat(b.path); err != nil {
			bad("%s %s: %w", b.name, b.path, errMissingBinary)
		}
	}
	return errors.Join(errs...)
}
