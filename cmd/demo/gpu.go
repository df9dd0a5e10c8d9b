package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
)

// gpuReading is one GPU's state as infergate reports it on /api/v1/gpus,
// plus the cause hints of the models running on it (/api/v1/models).
type gpuReading struct {
	UUID string `json:"gpu_uuid"`
	// Util is the utilization as a fraction, 0..1.
	Util float64 `json:"utilization"`
	// PowerW and LimitW are the power draw and its limit in watts; a
	// missing limit is 0.
	PowerW float64 `json:"power_watts"`
	LimitW float64 `json:"power_limit_watts"`
	// MemUsed and MemTotal are bytes; 0 when not exported.
	MemUsed  float64 `json:"memory_used_bytes"`
	MemTotal float64 `json:"memory_total_bytes"`
	// TempC is the temperature and SMClockHz the SM clock; 0 when not
	// exported.
	TempC     float64 `json:"temperature_celsius"`
	SMClockHz float64 `json:"sm_clock_hertz"`
	// Throttled and Reasons describe clock throttling.
	Throttled bool     `json:"throttled"`
	Reasons   []string `json:"clock_event_reasons"`
	// Hints maps each model on this GPU whose latency is up to its cause
	// hint (gpu_saturated, not_gpu, ...).
	Hints map[string]string `json:"-"`
}

// parseGPU reads infergate's /api/v1/gpus body and, from its
// /api/v1/models body, the hints of models whose latency is up; readings
// are sorted by UUID.
func parseGPU(gpus, models io.Reader) ([]gpuReading, error) {
	var doc struct {
		GPUs []gpuReading `json:"gpus"`
	}
	if err := json.NewDecoder(gpus).Decode(&doc); err != nil {
		return nil, fmt.Errorf("demo: parse /api/v1/gpus: %w", err)
	}
	var ms []struct {
		Model string  `json:"model"`
		UUID  *string `json:"gpu_uuid"`
		Hint  string  `json:"cause_hint"`
	}
	if err := json.NewDecoder(models).Decode(&ms); err != nil {
		return nil, fmt.Errorf("demo: parse /api/v1/models: %w", err)
	}
	out := doc.GPUs
	for i := range out {
		for _, m := range ms {
			if m.UUID != nil && *m.UUID == out[i].UUID && m.Hint != "" && m.Hint != "none" {
				if out[i].Hints == nil {
					out[i].Hints = map[string]string{}
				}
				out[i].Hints[m.Model] = m.Hint
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	return out, nil
}

// fetchGPU reads infergate's GPU telemetry (which it scrapes from
// simserver) and the models' cause hints.
func fetchGPU(ctx context.Context, hc *http.Client, admin string) ([]gpuReading, error) {
	gpus, err := httpGet(ctx, hc, "http://"+admin+"/api/v1/gpus")
	if err != nil {
		return nil, err
	}
	defer gpus.Close()
	models, err := httpGet(ctx, hc, "http://"+admin+"/api/v1/models")
	if err != nil {
		return nil, err
	}
	defer models.Close()
	return parseGPU(gpus, models)
}

// gpuLine renders the readings, one line per GPU (later lines indented
// to line up under "gpu:   "), e.g.
// "GPU-1234abcd…: util 42.0%  power 123.4 W / 300 W  mem 2.0/16.0 GiB  61 °C  1980 MHz".
// UUIDs are cut to their first 12 characters so a line fits 100 columns;
// /api/v1/gpus has them whole.
func gpuLine(gs []gpuReading) string {
	if len(gs) == 0 {
		return "no GPU readings (yet)"
	}
	parts := make([]string, len(gs))
	for i, g := range gs {
		var b strings.Builder
		if g.UUID != "" {
			fmt.Fprintf(&b, "%s: ", shortUUID(g.UUID))
		}
		fmt.Fprintf(&b, "util %.1f%%  power %.1f W", g.Util*100, g.PowerW)
		if g.LimitW > 0 {
			fmt.Fprintf(&b, " / %.0f W", g.LimitW)
		}
		if g.MemTotal > 0 {
			fmt.Fprintf(&b, "  mem %.1f/%.1f GiB", g.MemUsed/(1<<30), g.MemTotal/(1<<30))
		}
		if g.TempC > 0 {
			fmt.Fprintf(&b, "  %.0f °C", g.TempC)
		}
		if g.SMClockHz > 0 {
			fmt.Fprintf(&b, "  %.0f MHz", g.SMClockHz/1e6)
		}
		if g.Throttled {
			fmt.Fprintf(&b, "  THROTTLED (%s)", strings.Join(g.Reasons, ","))
		}
		parts[i] = b.String()
	}
	return strings.Join(parts, "\n       ")
}

// shortUUID cuts a GPU UUID to its first 12 characters ("GPU-" and 8 hex
// digits), marking the cut with "…".
func shortUUID(u string) string {
	const keep = 12
	if r := []rune(u); len(r) > keep+1 {
		return string(r[:keep]) + "…"
	}
	return u
}

// hintLine lists the cause hint of every model whose latency is up
// (hint not "none"), sorted by model, e.g. "resnet50 gpu_saturated,
// simple unknown"; the legend explains the hints. alerts (see
// recovering) says what the latency alert of a model does when the
// hint alone would contradict it: "resnet50 recovering: alert holds
// until 1m20s".
func hintLine(gs []gpuReading, alerts map[string]string) string {
	hints := map[string]string{}
	for _, g := range gs {
		for m, h := range g.Hints {
			hints[m] = h
		}
	}
	for m, a := range alerts {
		if h := hints[m]; h != "" {
			hints[m] = h + " (" + a + ")"
		} else {
			hints[m] = a
		}
	}
	if len(hints) == 0 {
		return "none (no model's latency is up against its baseline)"
	}
	models := make([]string, 0, len(hints))
	for m := range hints {
		models = append(models, m)
	}
	sort.Strings(models)
	for i, m := range models {
		models[i] = m + " " + hints[m]
	}
	return strings.Join(models, ", ")
}
