package main

import (
	"strings"
	"testing"
)

const gpusBody = `{
  "sources": [{"source": "prometheus", "up": true, "errors": 0}],
  "gpus": [{"gpu_uuid": "GPU-sim-0", "source": "prometheus", "utilization": 0.4237, "power_watts": 187.25,
    "power_limit_watts": 300, "memory_used_bytes": 4294967296, "memory_total_bytes": 17179869184,
    "temperature_celsius": 61.4, "sm_clock_hertz": 990000000, "throttled": true,
    "clock_event_reasons": ["sw_thermal_slowdown", "hw_thermal_slowdown"]}],
  "models": {"resnet50": "GPU-sim-0"}
}`

const modelsBody = `[
  {"model": "resnet50", "gpu_uuid": "GPU-sim-0", "cause_hint": "gpu_throttled"},
  {"model": "simple", "gpu_uuid": "GPU-sim-0", "cause_hint": "none"},
  {"model": "other", "gpu_uuid": null, "cause_hint": "unknown"}
]`

func TestParseGPU(t *testing.T) {
	gs, err := parseGPU(strings.NewReader(gpusBody), strings.NewReader(modelsBody))
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].UUID != "GPU-sim-0" || gs[0].Util != 0.4237 || gs[0].MemTotal != 16<<30 || len(gs[0].Hints) != 1 {
		t.Fatalf("got %+v", gs)
	}
	want := "GPU-sim-0: util 42.4%  power 187.2 W / 300 W  mem 4.0/16.0 GiB  61 °C  990 MHz" +
		"  THROTTLED (sw_thermal_slowdown,hw_thermal_slowdown)"
	if got := gpuLine(gs); got != want {
		t.Errorf("gpuLine = %q, want %q", got, want)
	}
	if got, want := hintLine(gs, nil), "resnet50 gpu_throttled"; got != want {
		t.Errorf("hintLine = %q, want %q", got, want)
	}
}

func TestGPULineSeveral(t *testing.T) {
	gs := []gpuReading{
		{UUID: "GPU-5f1c0e42-sim0-4a6b-9c1d-5e1d0a7b3c21", Util: 0.5, PowerW: 100,
			Hints: map[string]string{"simple": "unknown", "resnet50": "gpu_saturated"}},
		{UUID: "GPU-0b", Util: 0.25, PowerW: 50, Hints: map[string]string{"mobilenet_v3": "not_gpu"}},
	}
	want := "GPU-5f1c0e42…: util 50.0%  power 100.0 W\n" +
		"       GPU-0b: util 25.0%  power 50.0 W"
	if got := gpuLine(gs); got != want {
		t.Errorf("gpuLine = %q, want %q", got, want)
	}
	if got, want := hintLine(gs, nil), "mobilenet_v3 not_gpu, resnet50 gpu_saturated, simple unknown"; got != want {
		t.Errorf("hintLine = %q, want %q", got, want)
	}
}

func TestParseGPUNone(t *testing.T) {
	gs, err := parseGPU(strings.NewReader(`{"sources": [], "gpus": [], "models": {}}`), strings.NewReader(`[]`))
	if err != nil {
		t.Fatal(err)
	}
	if got := gpuLine(gs); got != "no GPU readings (yet)" {
		t.Errorf("gpuLine = %q", got)
	}
	if got := hintLine(gs, nil); got != "none (no model's latency is up against its baseline)" {
		t.Errorf("hintLine = %q", got)
	}
}

func TestParseGPUBad(t *testing.T) {
	if _, err := parseGPU(strings.NewReader("{"), strings.NewReader("[]")); err == nil {
		t.Error("want an error for a broken body")
	}
}
