package monitor

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestConfigProblems(t *testing.T) {
	if errs := DefaultConfig().Problems(); len(errs) != 0 {
		t.Fatalf("defaults have problems: %v", errs)
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"zero series", func(c *Config) { c.MaxSeries = 0 }, "max_series: must be positive, got 0"},
		{"zero idle", func(c *Config) { c.SeriesIdleTimeout = 0 }, "series_idle_timeout: must be positive, got 0s"},
		{"zero label bytes", func(c *Config) { c.MaxLabelBytes = 0 }, "max_label_bytes: must be between 1 and 4096, got 0"},
		{"long labels", func(c *Config) { c.MaxLabelBytes = MaxLabelBytesLimit + 1 }, "max_label_bytes: must be between 1 and 4096, got 4097"},
		{"no slow calls", func(c *Config) { c.SlowCalls = 0 }, "slow_calls: must be between 1 and 100, got 0"},
		{"too many slow calls", func(c *Config) { c.SlowCalls = MaxSlowCalls + 1 }, "slow_calls: must be between 1 and 100, got 101"},
		{"no summary window", func(c *Config) { c.SummaryWindows = nil }, "summary_windows: must name at least one of 1m, 5m, 15m"},
		{"a made-up window", func(c *Config) { c.SummaryWindows = []string{"1m", "1h"} }, `summary_windows: "1h" is not a window: want 1m, 5m or 15m`},
		{"a made-up quantile", func(c *Config) { c.ComponentQuantiles = []float64{0.99, 0.95} }, "component_quantiles: 0.95 is not an exported quantile: want 0.5, 0.9, 0.99 or 0.999"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			errs := c.Problems()
			if len(errs) != 1 || errs[0].Error() != tc.want {
				t.Errorf("problems = %v, want %q", errs, tc.want)
			}
		})
	}
}

// The default exports the 1m window's summaries only; the option names
// the windows asked for.
func TestConfigSummaryWindows(t *testing.T) {
	c := DefaultConfig().Options().config()
	if c.exported != [NumWindows]bool{true, false, false} {
		t.Errorf("default exported windows %v, want 1m only", c.exported)
	}
	d := DefaultConfig()
	d.SummaryWindows = []string{"15m", "1m"}
	if got := d.Options().config().exported; got != [NumWindows]bool{true, false, true} {
		t.Errorf("1m and 15m asked: exported %v", got)
	}
	if got := (Options{}).config().exported; got != [NumWindows]bool{true, true, true} {
		t.Errorf("zero Options: exported %v, want all", got)
	}
}

func ExampleConfig_Problems() {
	c := DefaultConfig()
	c.MaxSeries = -5
	for _, err := range c.Problems() {
		fmt.Println(err)
	}
	d := DefaultConfig()
	fmt.Println(d.MaxSeries, d.SeriesIdleTimeout, d.MaxLabelBytes)
	// Output:
	// max_series: must be positive, got -5
	// 1000 15m0s 128
}

// TestComponentQuantiles: by default the upstream and overhead summaries
// carry p99 only (what the dashboard reads), the request latency and
// queue summaries all four (the scaling rules read the queue's p90); the
// option asks for more, and the zero Options (a library user) get all.
func TestComponentQuantiles(t *testing.T) {
	scrape := func(opts Options) map[string][]float64 {
		t.Helper()
		r, clk := newTestRegistry(t, opts)
		reg := prometheus.NewRegistry()
		if err := r.Register(reg); err != nil {
			t.Fatal(err)
		}
		r.Record(testKey, Sample{Total: 3 * time.Millisecond, Upstream: 2 * time.Millisecond, Queue: 500 * time.Microsecond, Code: "OK"})
		tick(r, clk, 1)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if sm := m.GetSummary(); sm != nil {
					if sm.GetSampleCount() != 1 {
						t.Errorf("%s: count %d, want 1", mf.GetName(), sm.GetSampleCount())
					}
					got[mf.GetName()] = nil
					for _, q := range sm.GetQuantile() {
						got[mf.GetName()] = append(got[mf.GetName()], q.GetQuantile())
					}
				}
			}
		}
		return got
	}
	all := []float64{0.5, 0.9, 0.99, 0.999}
	for _, tc := range []struct {
		name       string
		opts       Options
		components []float64
	}{
		{"default", DefaultConfig().Options(), []float64{0.99}},
		{"asked", func() Options { c := DefaultConfig(); c.ComponentQuantiles = []float64{0.5, 0.99}; return c.Options() }(), []float64{0.5, 0.99}},
		{"zero Options", Options{}, all},
	} {
		got := scrape(tc.opts)
		for _, name := range []string{"infergate_request_latency_seconds", "infergate_queue_latency_seconds"} {
			if !slices.Equal(got[name], all) {
				t.Errorf("%s: %s quantiles %v, want %v", tc.name, name, got[name], all)
			}
		}
		for _, name := range []string{"infergate_upstream_latency_seconds", "infergate_proxy_overhead_seconds"} {
			if q, ok := got[name]; !ok || !slices.Equal(q, tc.components) {
				t.Errorf("%s: %s quantiles %v (exported %v), want %v", tc.name, name, q, ok, tc.components)
			}
		}
	}
}

// TestClassicBucketsOff: with classic_buckets false the request histogram
// is its native half only (and _sum, _count): a busy series' scrape loses
// its 17 classic bounds, the native buckets stay for Prometheus to read.
func TestClassicBucketsOff(t *testing.T) {
	for _, classic := range []bool{true, false} {
		c := DefaultConfig()
		c.ClassicBuckets = classic
		opts := c.Options()
		r, _ := newTestRegistry(t, opts)
		reg := prometheus.NewRegistry()
		if err := r.Register(reg); err != nil {
			t.Fatal(err)
		}
		r.Record(testKey, Sample{Total: 3 * time.Millisecond, Code: "OK"})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var h *dto.Histogram
		for _, mf := range mfs {
			if mf.GetName() == "infergate_request_duration_seconds" {
				h = mf.GetMetric()[0].GetHistogram()
			}
		}
		if h == nil {
			t.Fatal("no request histogram")
		}
		if n := len(h.GetBucket()); classic && n != len(durationBuckets) || !classic && n != 0 {
			t.Errorf("classic_buckets %v: %d classic buckets", classic, n)
		}
		if h.GetSchema() != nativeSchema || len(h.GetPositiveSpan()) == 0 || h.GetSampleCount() != 1 {
			t.Errorf("classic_buckets %v: native schema %d, spans %v, count %d; want schema %d with the call", classic,
				h.GetSchema(), h.GetPositiveSpan(), h.GetSampleCount(), nativeSchema)
		}
	}
}
