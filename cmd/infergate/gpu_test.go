package main

import (
	"strings"
	"testing"
	"time"

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
