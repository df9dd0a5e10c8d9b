package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// gpuFlags applies --gpu-source and --gpu-metrics-url: given, they
// replace gpu.sources with one source (or none, for off).
func (c *Config) gpuFlags() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	kind := strings.ToLower(c.gpuSource)
	if kind == "" {
		kind = gpu.KindPrometheus // a URL alone means a scrape
	}
	switch kind {
	case "off":
		c.GPU.Sources = nil
	case gpu.KindNVML:
		c.GPU.Sources = []gpu.SourceConfig{{Kind: gpu.KindNVML}}
		if c.gpuURL != "" {
			bad("--gpu-metrics-url", "only with --gpu-source prometheus")
		}
	case gpu.KindPrometheus:
		c.GPU.Sources = []gpu.SourceConfig{{Kind: gpu.KindPrometheus, URL: c.gpuURL}}
		if c.gpuURL == "" {
			bad("--gpu-metrics-url", "required with --gpu-source prometheus (e.g. http://triton:8002/metrics)")
		}
	default:
		bad("--gpu-source", "must be nvml, prometheus or off, got %q", c.gpuSource)
	}
	return errs
}

// gpuRuntime is the GPU telemetry and correlation of one proxy.
type gpuRuntime struct {
	hub  *gpu.Hub
	corr *correlate.Correlator
	cost *correlate.Attributor
	// mon is read for the version comparison of /api/v1/models.
	mon *monitor.Registry
}

// startGPU builds the samplers and the correlator and registers their
// metrics; run starts them. With no sources the correlator still runs, so
// /api/v1/models shows latency (with hint "unknown" on a rise).
//
// slow says which replica of a model's pool is much slower than the
// others (the routing's, built after this).
func startGPU(c gpu.Config, prices correlate.Prices, mon *monitor.Registry, bs *baseline.Store, slo func(string) baseline.SLO,
	slow func(string) (correlate.SlowEndpoint, bool), reg prometheus.Registerer, log *slog.Logger) (*gpuRuntime, error) {
	hub := gpu.NewHub(c.Models, c.Samplers(log)...)
	corr := correlate.New(correlate.Options{Latency: mon, GPU: hub.State, Interval: c.Interval, Baselines: bs, SLO: slo,
		SlowEndpoint: slow})
	if err := hub.Register(reg); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := corr.Register(reg); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	// Cost attribution reads the same GPU state; with no source it still
	// serves /api/v1/cost, which then says why nothing is attributed.
	var state func() gpu.State
	if len(c.Sources) > 0 {
		state = hub.State
	}
	cost := correlate.NewAttributor(correlate.CostOptions{Calls: mon, Group: corr.InferenceModel, GPU: state,
		Interval: c.Interval, Prices: prices, Warn: func(msg string) { log.Warn(msg) }})
	if err := cost.Register(reg); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &gpuRuntime{hub: hub, corr: corr, cost: cost, mon: mon}, nil
}

// run samples until ctx ends; all of it is off the request path.
func (g *gpuRuntime) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { g.hub.Run(ctx) })
	wg.Go(func() { g.corr.Run(ctx) })
	wg.Go(func() { g.cost.Run(ctx) })
	wg.Wait()
}
