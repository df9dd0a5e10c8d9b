package monitor

import (
	"fmt"
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
}

// DefaultConfig returns the Config of the documented defaults.
func DefaultConfig() Config {
	return Config{MaxSeries: DefaultMaxSeries, SeriesIdleTimeout: DefaultIdleTimeout, MaxLabelBytes: DefaultMaxLabelBytes,
		SlowCalls: DefaultSlowCalls}
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
	return errs
}

// Options returns the Registry options of c; the other options keep their
// zero values.
func (c Config) Options() Options {
	return Options{MaxSeries: c.MaxSeries, IdleTimeout: c.SeriesIdleTimeout, MaxLabelBytes: c.MaxLabelBytes, SlowCalls: c.SlowCalls}
}
