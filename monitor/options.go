package monitor

import (
	"runtime"
	"slices"
	"time"
)

// Defaults for the zero values of Options, and of Config (DefaultConfig).
const (
	DefaultMaxSeries     = 1000
	DefaultSliceLength   = time.Second
	DefaultIdleTimeout   = 15 * time.Minute
	DefaultMaxLabelBytes = 128
	maxDefaultShards     = 4
	maxShards            = 64
)

// Options configures a Registry. The zero value is ready to use.
type Options struct {
	// MaxSeries caps the number of distinct series; 0 or less means
	// DefaultMaxSeries (1000). Beyond it calls go to one overflow series
	// whose labels are all "other".
	MaxSeries int

	// IdleTimeout drops a series that has had no calls for this long, and
	// frees its memory and its place under MaxSeries. 0 or less means
	// DefaultIdleTimeout (15m, the longest window). A shorter value drops
	// quiet series before their 5m and 15m windows are empty.
	IdleTimeout time.Duration

	// MaxLabelBytes is the longest Model, Version or Method a series key
	// may carry; a longer value, or one that is not valid UTF-8, never
	// becomes a label: the call goes to the overflow series. 0 or less
	// means DefaultMaxLabelBytes (128).
	MaxLabelBytes int

	// Now is the clock; nil means time.Now. Run uses it to catch up on
	// ticks it missed, and snapshots are stamped with it.
	Now func() time.Time

	// SliceLength is the finest window step, the period of Run's ticker and
	// the most a snapshot lags behind the calls. 0 or less means 1s. It is
	// rounded so that a whole number of slices make one minute, and capped
	// at one minute.
	SliceLength time.Duration

	// Shards is the number of HDR recorders per series that concurrent
	// Record calls spread over. 0 or less means GOMAXPROCS rounded up to a
	// power of two, at most 4; other values are rounded up to a power of
	// two, at most 64. A shard buffers up to 32 calls of a slice raw; only
	// beyond that does it borrow dense histograms (about 184 KiB per
	// component) until the slice ends.
	Shards int

	// NoRequestHistogram leaves out infergate_request_duration_seconds,
	// the one metric that Record updates through client_golang; the HDR
	// summaries stay. The zero value exports it.
	NoRequestHistogram bool

	// SlowCalls is the number of slowest calls kept per model, version
	// and step of the windows (slow.go); 0 or less means
	// DefaultSlowCalls, at most MaxSlowCalls.
	SlowCalls int

	// SummaryWindows are the windows whose summaries (quantiles, sum,
	// count, max) /metrics exports; nil means all. Each window costs a
	// busy series about 19 lines of every scrape; the snapshot API
	// (Snapshot, /api/v1/series) keeps every window whatever this says.
	SummaryWindows []Window

	// ComponentQuantiles are the quantiles (some of Quantiles) /metrics
	// exports in the upstream and proxy overhead summaries; nil means all
	// four. The request latency and queue summaries export all four
	// whatever this says, and the API keeps every quantile.
	ComponentQuantiles []float64

	// NoClassicBuckets leaves the classic buckets out of the request
	// histogram: only its native histogram (and _sum, _count) is
	// exported.
	NoClassicBuckets bool
}

// config is Options with the defaults applied.
type config struct {
	maxSeries       int
	now             func() time.Time
	slice           time.Duration
	slicesPerMinute int
	shards          int
	promHistogram   bool
	classic         bool // the request histogram's classic buckets
	idleTicks       int
	maxLabelBytes   int
	slowCalls       int
	// slowSteps is the number of slow-call steps per minute, slowTicks
	// the slices of one.
	slowSteps, slowTicks int
	// exported are the windows /metrics exports summaries of.
	exported [NumWindows]bool
	// componentQ are the quantiles (by index in Quantiles) /metrics
	// exports in the component summaries.
	componentQ [len(Quantiles)]bool
}

func (o Options) config() config {
	c := config{
		maxSeries:     o.MaxSeries,
		now:           o.Now,
		slice:         o.SliceLength,
		shards:        o.Shards,
		promHistogram: !o.NoRequestHistogram,
		classic:       !o.NoClassicBuckets,
	}
	if c.maxSeries <= 0 {
		c.maxSeries = DefaultMaxSeries
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.slice <= 0 {
		c.slice = DefaultSliceLength
	}
	c.slice = min(c.slice, time.Minute)
	c.slicesPerMinute = max(1, int((time.Minute+c.slice/2)/c.slice))
	c.slice = time.Minute / time.Duration(c.slicesPerMinute)
	if c.shards <= 0 {
		c.shards = min(runtime.GOMAXPROCS(0), maxDefaultShards)
	}
	c.shards = min(ceilPow2(c.shards), maxShards)
	idle := o.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	c.idleTicks = max(1, int((idle+c.slice-1)/c.slice))
	c.maxLabelBytes = o.MaxLabelBytes
	if c.maxLabelBytes <= 0 {
		c.maxLabelBytes = DefaultMaxLabelBytes
	}
	c.slowCalls = o.SlowCalls
	if c.slowCalls <= 0 {
		c.slowCalls = DefaultSlowCalls
	}
	c.slowCalls = min(c.slowCalls, MaxSlowCalls)
	c.slowSteps = gcd(c.slicesPerMinute, slowStepsPerMinute)
	c.slowTicks = c.slicesPerMinute / c.slowSteps
	for w := range Window(NumWindows) {
		c.exported[w] = o.SummaryWindows == nil
	}
	for _, w := range o.SummaryWindows {
		if w >= 0 && w < NumWindows {
			c.exported[w] = true
		}
	}
	for i, q := range Quantiles {
		c.componentQ[i] = o.ComponentQuantiles == nil || slices.Contains(o.ComponentQuantiles, q)
	}
	return c
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// ceilPow2 returns the smallest power of two >= n (n >= 1).
func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
