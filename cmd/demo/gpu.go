package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// gpuReading is one GPU's state from Triton-style metrics.
type gpuReading struct {
	UUID string
	// Util is the utilization as a fraction, 0..1.
	Util float64
	// PowerW and LimitW are the power draw and its limit in watts; a
	// missing limit is 0.
	PowerW, LimitW float64
	// MemUsed and MemTotal are bytes; 0 when not exported.
	MemUsed, MemTotal float64
}

// parseGPU reads nv_gpu_* gauges from a Prometheus text exposition, one
// reading per gpu_uuid, sorted by UUID.
func parseGPU(r io.Reader) ([]gpuReading, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("demo: parse GPU metrics: %w", err)
	}
	byUUID := map[string]*gpuReading{}
	get := func(m *dto.Metric) *gpuReading {
		uuid := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "gpu_uuid" {
				uuid = l.GetValue()
			}
		}
		g := byUUID[uuid]
		if g == nil {
			g = &gpuReading{UUID: uuid}
			byUUID[uuid] = g
		}
		return g
	}
	fields := map[string]func(*gpuReading, float64){
		"nv_gpu_utilization":        func(g *gpuReading, v float64) { g.Util = v },
		"nv_gpu_power_usage":        func(g *gpuReading, v float64) { g.PowerW = v },
		"nv_gpu_power_limit":        func(g *gpuReading, v float64) { g.LimitW = v },
		"nv_gpu_memory_used_bytes":  func(g *gpuReading, v float64) { g.MemUsed = v },
		"nv_gpu_memory_total_bytes": func(g *gpuReading, v float64) { g.MemTotal = v },
	}
	for name, set := range fields {
		for _, m := range fams[name].GetMetric() {
			set(get(m), m.GetGauge().GetValue())
		}
	}
	out := make([]gpuReading, 0, len(byUUID))
	for _, g := range byUUID {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	return out, nil
}

// fetchGPU scrapes simserver's /metrics for its GPU readings.
func fetchGPU(ctx context.Context, hc *http.Client, admin string) ([]gpuReading, error) {
	body, err := httpGet(ctx, hc, "http://"+admin+"/metrics")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return parseGPU(body)
}

// gpuLine renders the readings on one line, e.g.
// "GPU-1234: util 42.0%  power 123.4 W / 300 W  mem 2.0/16.0 GiB".
func gpuLine(gs []gpuReading) string {
	if len(gs) == 0 {
		return "no nv_gpu_* metrics"
	}
	parts := make([]string, len(gs))
	for i, g := range gs {
		var b strings.Builder
		if g.UUID != "" {
			fmt.Fprintf(&b, "%s: ", g.UUID)
		}
		fmt.Fprintf(&b, "util %.1f%%  power %.1f W", g.Util*100, g.PowerW)
		if g.LimitW > 0 {
			fmt.Fprintf(&b, " / %.0f W", g.LimitW)
		}
		if g.MemTotal > 0 {
			fmt.Fprintf(&b, "  mem %.1f/%.1f GiB", g.MemUsed/(1<<30), g.MemTotal/(1<<30))
		}
		parts[i] = b.String()
	}
	return strings.Join(parts, " | ")
}
