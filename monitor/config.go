package monitor

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// MaxLabelBytesLimit is the largest Config.MaxLabelBytes: a label value
// longer than 4 KiB is a payload, not a name.
const MaxLabelBytesLimit = 4096

// Config is the monitor section of a YAML file: the bounds on the series
// clients' calls create. Start from DefaultConfig and decode over it, so
// that a key the file leaves out keeps its default and an explicit 0 is
// seen (and refused by Problems).
type Config struct {
	// MaxSeries caps distinct series; beyond it calls count under "other".
	// Default DefaultMaxSeries.
	MaxSeries int `yaml:"max_series"`
	// SeriesIdleTimeout drops a series without calls for this long, freeing
	// its memory and its place under the cap. Default DefaultIdleTimeout,
	// the longest window; shorter values cut the 5m and 15m windows of
	// quiet series.
	SeriesIdleTimeout time.Duration `yaml:"series_idle_timeout"`
	// MaxLabelBytes is the longest model, version or method a client's call
	// may turn into a label value; longer or non-UTF-8 values count under
	// "other". Default DefaultMaxLabelBytes, at most MaxLabelBytesLimit.
	MaxLabelBytes int `yaml:"max_label_bytes"`
	// SlowCalls is the number of slowest calls kept per model, version
	// and window step (GET /api/v1/slow). Default DefaultSlowCalls, at
	// most MaxSlowCalls; each one kept costs a model about 3 KiB
	// (SlowKeeperBytes).
	SlowCalls int `yaml:"slow_calls"`
	// SummaryWindows are the windows (1m, 5m, 15m) whose latency
	// summaries /metrics exports per series. Default 1m, the window the
	// dashboard, the scaling rules and the alerts read: each window more
	// adds about 19 lines a busy series to every scrape. The API
	// (/api/v1/series, /api/v1/models) gives every window regardless.
	SummaryWindows []string `yaml:"summary_windows"`
	// ClassicBuckets exports infergate_request_duration_seconds's classic
	// buckets (17 bounds and +Inf) beside its native histogram. Default
	// true: a Prometheus before 3.8, and the adapter's and KEDA's rules,
	// read them. A fleet whose Prometheus scrapes native histograms can
	// turn them off: they are 20 of a busy series' 46 lines (about 4 KB),
	// and the shipped alert rules and dashboard read the native histogram
	// first.
	ClassicBuckets bool `yaml:"classic_buckets"`
	// ComponentQuantiles are the quantiles (0.5, 0.9, 0.99, 0.999) that
	// the upstream and proxy overhead summaries export. Default 0.99, the
	// one the dashboard reads (with their _sum): each one more adds a busy
	// series two lines (about 400 bytes) to every scrape. The request
	// latency summary exports all four whatever this says, and so does
	// the queue summary (only batched series have one, and the scaling
	// rules read its p90); the API gives every quantile of every
	// component.
	ComponentQuantiles []float64 `yaml:"component_quantiles"`
}

// DefaultSummaryWindows is Config.SummaryWindows's default.
var DefaultSummaryWindows = []string{"1m"}

// DefaultComponentQuantiles is Config.ComponentQuantiles's default.
var DefaultComponentQuantiles = []float64{0.99}

// DefaultConfig returns the Config of the documented defaults.
func DefaultConfig() Config {
	return Config{MaxSeries: DefaultMaxSeries, SeriesIdleTimeout: DefaultIdleTimeout, MaxLabelBytes: DefaultMaxLabelBytes,
		SlowCalls: DefaultSlowCalls, SummaryWindows: slices.Clone(DefaultSummaryWindows), ClassicBuckets: true,
		ComponentQuantiles: slices.Clone(DefaultComponentQuantiles)}
}

// Problems returns one error per bad field, each starting with the field's
// YAML name ("max_series: must be positive, got 0"). Zero is never valid.
func (c Config) Problems() []error {
	var errs []error
	if c.MaxSeries < 1 {
		errs = append(errs, fmt.Errorf("max_series: must be positive, got %d", c.MaxSeries))
	}
	if c.SeriesIdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("series_idle_timeout: must be positive, got %s", c.SeriesIdleTimeout))
	}
	if c.MaxLabelBytes < 1 || c.MaxLabelBytes > MaxLabelBytesLimit {
		errs = append(errs, fmt.Errorf("max_label_bytes: must be between 1 and %d, got %d", MaxLabelBytesLimit, c.MaxLabelBytes))
	}
	if c.SlowCalls < 1 || c.SlowCalls > MaxSlowCalls {
		errs = append(errs, fmt.Errorf("slow_calls: must be between 1 and %d, got %d", MaxSlowCalls, c.SlowCalls))
	}
	if len(c.SummaryWindows) == 0 {
		errs = append(errs, errors.New("summary_windows: must name at least one of 1m, 5m, 15m"))
	}
	for _, w := range c.SummaryWindows {
		if _, ok := ParseWindow(w); !ok {
			errs = append(errs, fmt.Errorf("summary_windows: %q is not a window: want 1m, 5m or 15m", w))
		}
	}
	for _, q := range c.ComponentQuantiles {
		if !slices.Contains(Quantiles[:], q) {
			errs = append(errs, fmt.Errorf("component_quantiles: %g is not an exported quantile: want 0.5, 0.9, 0.99 or 0.999", q))
		}
	}
	return errs
}

// Options returns the Registry options of c; the other options keep their
// zero values.
func (c Config) Options() Options {
	o := Options{MaxSeries: c.MaxSeries, IdleTimeout: c.SeriesIdleTimeout, MaxLabelBytes: c.MaxLabelBytes, SlowCalls: c.SlowCalls,
		SummaryWindows: []Window{}, NoClassicBuckets: !c.ClassicBuckets, ComponentQuantiles: slices.Clone(c.ComponentQuantiles)}
	if o.ComponentQuantiles == nil {
		o.ComponentQuantiles = []float64{} // none, not Options' nil (all)
	}
	for _, name := range c.SummaryWindows {
		if w, ok := ParseWindow(name); ok {
			o.SummaryWindows = append(o.SummaryWindows, w)
		}
	}
	return o
}
