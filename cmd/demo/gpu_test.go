package main

import (
	"strings"
	"testing"
)

const gpuExposition = `# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-sim-0"} 0.4237
# HELP nv_gpu_power_usage GPU power usage in watts
# TYPE nv_gpu_power_usage gauge
nv_gpu_power_usage{gpu_uuid="GPU-sim-0"} 187.25
# HELP nv_gpu_power_limit GPU power management limit in watts
# TYPE nv_gpu_power_limit gauge
nv_gpu_power_limit{gpu_uuid="GPU-sim-0"} 300
# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-sim-0"} 4.294967296e+09
# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{gpu_uuid="GPU-sim-0"} 1.7179869184e+10
# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{model="resnet50",version="1"} 1234
`

func TestParseGPU(t *testing.T) {
	gs, err := parseGPU(strings.NewReader(gpuExposition))
	if err != nil {
		t.Fatal(err)
	}
	want := gpuReading{UUID: "GPU-sim-0", Util: 0.4237, PowerW: 187.25, LimitW: 300, MemUsed: 4 << 30, MemTotal: 16 << 30}
	if len(gs) != 1 || gs[0] != want {
		t.Fatalf("got %+v, want [%+v]", gs, want)
	}
	if got, line := gpuLine(gs), "GPU-sim-0: util 42.4%  power 187.2 W / 300 W  mem 4.0/16.0 GiB"; got != line {
		t.Errorf("gpuLine = %q, want %q", got, line)
	}
}

func TestParseGPUNone(t *testing.T) {
	gs, err := parseGPU(strings.NewReader("# TYPE up gauge\nup 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := gpuLine(gs); got != "no nv_gpu_* metrics" {
		t.Errorf("gpuLine = %q", got)
	}
}

func TestParseGPUBad(t *testing.T) {
	if _, err := parseGPU(strings.NewReader("nv_gpu_utilization{ 1\n")); err == nil {
		t.Error("want an error for a broken exposition")
	}
}
