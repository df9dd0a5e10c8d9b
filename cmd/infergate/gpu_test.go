package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

func TestGPUConfigFromYAML(t *testing.T) {
	c, err := parseConfig([]string{"--config", "testdata/config.gpu.good.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	g := c.GPU
	if g.Interval != 2*time.Second || len(g.Sources) != 3 {
		t.Fatalf("gpu = %+v", g)
	}
	want := []gpu.SourceConfig{
		{Kind: "prometheus", Name: "prometheus", URL: "http://triton:8002/metrics", Interval: 2 * time.Second, Timeout: 500 * time.Millisecond},
		{Kind: "prometheus", Name: "prometheus_2", URL: "http://dcgm-exporter:9400/metrics", Interval: 5 * time.Second},
		{Kind: "nvml", Name: "nvml", Interval: 2 * time.Second},
	}
	for i := range want {
		if g.Sources[i] != want[i] {
			t.Errorf("sources[%d] = %+v, want %+v", i, g.Sources[i], want[i])
		}
	}
	if g.Models["resnet50"] == "" {
		t.Errorf("models = %v", g.Models)
	}
}

func TestGPUFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []gpu.SourceConfig
	}{
		{"default off", nil, nil},
		{"scrape", []string{"--gpu-source", "prometheus", "--gpu-metrics-url", "http://127.0.0.1:8002/metrics", "--gpu-interval", "100ms"},
			[]gpu.SourceConfig{{Kind: "prometheus", Name: "prometheus", URL: "http://127.0.0.1:8002/metrics", Interval: 100 * time.Millisecond}}},
		{"URL alone means scrape", []string{"--gpu-metrics-url", "http://h:9400/metrics"},
			[]gpu.SourceConfig{{Kind: "prometheus", Name: "prometheus", URL: "http://h:9400/metrics", Interval: time.Second}}},
		{"nvml", []string{"--gpu-source", "NVML"}, []gpu.SourceConfig{{Kind: "nvml", Name: "nvml", Interval: time.Second}}},
		{"flag replaces the file", []string{"--config", "testdata/config.gpu.good.yaml", "--gpu-source", "off"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if len(args) == 0 || args[0] != "--config" {
				args = append([]string{"--upstream", "a:1"}, args...)
			}
			c, err := parseConfig(args)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.GPU.Sources) != len(tc.want) {
				t.Fatalf("sources = %+v, want %+v", c.GPU.Sources, tc.want)
			}
			for i := range tc.want {
				if c.GPU.Sources[i] != tc.want[i] {
					t.Errorf("sources[%d] = %+v, want %+v", i, c.GPU.Sources[i], tc.want[i])
				}
			}
		})
	}
}

func TestGPUConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"scrape without URL", []string{"--upstream", "a:1", "--gpu-source", "prometheus"},
			[]string{"config: --gpu-metrics-url: required with --gpu-source prometheus"}},
		{"unknown source", []string{"--upstream", "a:1", "--gpu-source", "dcgm"},
			[]string{`config: --gpu-source: must be nvml, prometheus or off, got "dcgm"`}},
		{"URL with nvml", []string{"--upstream", "a:1", "--gpu-source", "nvml", "--gpu-metrics-url", "http://x/metrics"},
			[]string{"config: --gpu-metrics-url: only with --gpu-source prometheus"}},
		{"negative interval", []string{"--upstream", "a:1", "--gpu-interval", "-1s"},
			[]string{"config: gpu.interval: must be positive"}},
		{"bad YAML sources", []string{"--config", "testdata/config.gpu.bad-source.yaml"}, []string{
			`config: gpu.sources[0].url: must be an http(s) URL of a metrics endpoint, got "triton:8002/metrics"`,
			`config: gpu.sources[1].kind: must be nvml or prometheus, got "dcgm"`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestModelsJSON(t *testing.T) {
	dev := gpu.Device{UUID: "GPU-1", Source: "prometheus", Utilization: 0.97, TemperatureCelsius: 70,
		Known: gpu.FieldUtilization | gpu.FieldTemperature}
	states := []correlate.ModelState{
		{Model: "resnet50", Calls: 10, P50: 5 * time.Millisecond, P99: 40 * time.Millisecond, Baseline: 10 * time.Millisecond,
			LatencyUp: true, GPUUUID: "GPU-1", GPUFrom: gpu.FromSource, GPU: &dev,
			Correlation: [2]float64{0.9, math.NaN()}, QueueCorrelation: [2]float64{math.NaN(), math.NaN()},
			Hint: correlate.HintGPUSaturated, LatencyWindow: 5 * time.Second},
		{Model: "cpu", Correlation: [2]float64{math.NaN(), math.NaN()}, Hint: correlate.HintNone},
	}
	b, err := json.Marshal(modelsJSON(states, nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0]["model"] != "cpu" || got[1]["model"] != "resnet50" {
		t.Fatalf("models = %s", b)
	}
	r := got[1]
	for k, want := range map[string]any{
		"p50_seconds": 0.005, "p99_seconds": 0.04, "gpu_uuid": "GPU-1", "gpu_utilization": 0.97,
		"correlation": 0.9, "cause_hint": "gpu_saturated", "baseline_p99_seconds": 0.01, "latency_up": true,
	} {
		if r[k] != want {
			t.Errorf("%s = %v, want %v", k, r[k], want)
		}
	}
	if w := r["correlation_windows"].(map[string]any); w["1m"] != 0.9 || w["5m"] != nil {
		t.Errorf("correlation_windows = %v (NaN must be null)", w)
	}
	if g := r["gpu"].(map[string]any); g["temperature_celsius"] != 70.0 || g["power_watts"] != nil {
		t.Errorf("gpu = %v (unreported readings must be absent)", g)
	}
	c := got[0]
	for _, k := range []string{"gpu_uuid", "gpu_utilization", "correlation", "gpu", "baseline_p99_seconds"} {
		if v, ok := c[k]; !ok || v != nil {
			t.Errorf("cpu: %s = %v, %v; want present and null", k, v, ok)
		}
	}
}
