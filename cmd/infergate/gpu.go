package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// GPUConfig is the gpu section: where GPU telemetry comes from, which model
// runs on which GPU, and the sampling period of the latency correlation.
type GPUConfig struct {
	// Sources to sample; none means no GPU telemetry (cause hints are then
	// "unknown"). The flag --gpu-source replaces the list.
	Sources []GPUSourceConfig `yaml:"sources"`
	// Models maps a model name to the UUID of the GPU it runs on; it wins
	// over what sources report (Triton's per-model gpu_uuid labels).
	Models map[string]string `yaml:"models"`
	// Interval is the correlation's sampling period and every source's
	// default. Default 1s.
	Interval time.Duration `yaml:"interval"`

	// flagKind and flagURL hold --gpu-source and --gpu-metrics-url until
	// validate turns them into Sources; flagSet says either was given.
	flagKind, flagURL string
	flagSet           bool
}

// GPUSourceConfig is one GPU telemetry source.
type GPUSourceConfig struct {
	// Kind is nvml (the local driver; needs a cgo build) or prometheus (a
	// Triton, DCGM exporter or simserver metrics URL).
	Kind string `yaml:"kind"`
	// Name labels the source in metrics (source="..."); default the kind,
	// with "_2", "_3" ... appended when kinds repeat.
	Name string `yaml:"name"`
	// URL is the metrics endpoint of a prometheus source.
	URL string `yaml:"url"`
	// Interval is the sampling period; default gpu.interval.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one sample; default 2s or the interval, whichever is
	// shorter, but at least 250ms.
	Timeout time.Duration `yaml:"timeout"`
}

const (
	gpuKindNVML       = "nvml"
	gpuKindPrometheus = "prometheus"
)

// validate resolves the GPU flags, fills defaults and returns every
// problem, each naming its field.
func (c *GPUConfig) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.flagSet {
		c.flagSet = false
		kind := strings.ToLower(c.flagKind)
		if kind == "" {
			kind = gpuKindPrometheus // a URL alone means a scrape
		}
		switch kind {
		case "off":
			c.Sources = nil
		case gpuKindNVML:
			c.Sources = []GPUSourceConfig{{Kind: gpuKindNVML}}
			if c.flagURL != "" {
				bad("--gpu-metrics-url", "only with --gpu-source prometheus")
			}
		case gpuKindPrometheus:
			c.Sources = []GPUSourceConfig{{Kind: gpuKindPrometheus, URL: c.flagURL}}
			if c.flagURL == "" {
				bad("--gpu-metrics-url", "required with --gpu-source prometheus (e.g. http://triton:8002/metrics)")
			}
		default:
			bad("--gpu-source", "must be nvml, prometheus or off, got %q", c.flagKind)
		}
	}
	if c.Interval == 0 {
		c.Interval = gpu.DefaultInterval
	}
	if c.Interval < 0 {
		bad("gpu.interval", "must be positive, got %s", c.Interval)
	}
	used := map[string]int{}
	for i := range c.Sources {
		s := &c.Sources[i]
		field := fmt.Sprintf("gpu.sources[%d]", i)
		s.Kind = strings.ToLower(s.Kind)
		switch s.Kind {
		case gpuKindNVML:
			if s.URL != "" {
				bad(field+".url", "only for kind prometheus")
			}
		case gpuKindPrometheus:
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(field+".url", "must be an http(s) URL of a metrics endpoint, got %q", s.URL)
			}
		default:
			bad(field+".kind", "must be nvml or prometheus, got %q", s.Kind)
		}
		if s.Interval == 0 {
			s.Interval = c.Interval
		}
		if s.Interval < 0 {
			bad(field+".interval", "must be positive, got %s", s.Interval)
		}
		if s.Timeout < 0 {
			bad(field+".timeout", "must be positive, got %s", s.Timeout)
		}
		if s.Name == "" {
			s.Name = s.Kind
			if n := used[s.Kind]; n > 0 {
				s.Name = fmt.Sprintf("%s_%d", s.Kind, n+1)
			}
		}
		used[s.Kind]++
	}
	names := map[string]bool{}
	for i, s := range c.Sources {
		if names[s.Name] {
			bad(fmt.Sprintf("gpu.sources[%d].name", i), "duplicate source name %q", s.Name)
		}
		names[s.Name] = true
	}
	for m, u := range c.Models {
		if m == "" || u == "" {
			bad("gpu.models", "model names and GPU UUIDs must be set, got %q: %q", m, u)
		}
	}
	return errs
}

// gpuFlags are the GPU command-line flags.
type gpuFlags struct {
	source, url *string
	interval    *time.Duration
}

func addGPUFlags(fs *flag.FlagSet) *gpuFlags {
	return &gpuFlags{
		source:   fs.String("gpu-source", "off", "GPU telemetry: nvml (local driver), prometheus (scrape --gpu-metrics-url) or off"),
		url:      fs.String("gpu-metrics-url", "", "Triton (:8002/metrics), DCGM exporter (:9400/metrics) or simserver metrics URL"),
		interval: fs.Duration("gpu-interval", gpu.DefaultInterval, "GPU sampling and latency-correlation period"),
	}
}

// apply sets the GPU value of the flag named name, if it is one.
func (gf *gpuFlags) apply(name string, c *GPUConfig) {
	switch name {
	case "gpu-source":
		c.flagKind, c.flagSet = *gf.source, true
	case "gpu-metrics-url":
		c.flagURL, c.flagSet = *gf.url, true
	case "gpu-interval":
		c.Interval = *gf.interval
	}
}

// gpuRuntime is the GPU telemetry and correlation of one proxy.
type gpuRuntime struct {
	hub  *gpu.Hub
	corr *correlate.Correlator
}

// startGPU builds the samplers and the correlator and registers their
// metrics; run starts them. With no sources the correlator still runs, so
// /api/v1/models shows latency (with hint "unknown" on a rise).
func startGPU(c GPUConfig, mon *monitor.Registry, bs *baseline.Store, slo func(string) baseline.SLO, reg prometheus.Registerer, log *slog.Logger) (*gpuRuntime, error) {
	var samplers []*gpu.Sampler
	for _, s := range c.Sources {
		var src gpu.Source
		switch s.Kind {
		case gpuKindNVML:
			src = gpu.NewNVML(log)
		case gpuKindPrometheus:
			src = gpu.NewScrape(s.URL, nil)
		}
		samplers = append(samplers, gpu.NewSampler(src, gpu.SamplerOptions{
			Name: s.Name, Interval: s.Interval, Timeout: s.Timeout, Logger: log,
		}))
	}
	hub := gpu.NewHub(c.Models, samplers...)
	corr := correlate.New(correlate.Options{Latency: mon, GPU: hub.State, Interval: c.Interval, Baselines: bs, SLO: slo})
	if err := hub.Register(reg); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := corr.Register(reg); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &gpuRuntime{hub: hub, corr: corr}, nil
}

// run samples until ctx ends; all of it is off the request path.
func (g *gpuRuntime) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { g.hub.Run(ctx) })
	wg.Go(func() { g.corr.Run(ctx) })
	wg.Wait()
}
