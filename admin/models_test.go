package admin

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

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
	// The latency is the monitor's; a model with calls the correlator
	// has not sampled yet is shown too.
	views := []monitor.ModelView{
		{Model: "resnet50", Window: 5 * time.Second, Calls: 10, P50: 5 * time.Millisecond, P99: 40 * time.Millisecond},
		{Model: "new", Window: 5 * time.Second, Calls: 3, P50: time.Millisecond, P99: 2 * time.Millisecond},
	}
	b, err := json.Marshal(modelsJSON(views, states, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0]["model"] != "cpu" || got[1]["model"] != "new" || got[2]["model"] != "resnet50" {
		t.Fatalf("models = %s", b)
	}
	if n := got[1]; n["calls"] != 3.0 || n["p99_seconds"] != 0.002 || n["cause_hint"] != "none" || n["latency_window_seconds"] != 5.0 {
		t.Errorf("a model the correlator has not sampled: %v", n)
	}
	r := got[2]
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

// TestModelsAnomaly: each model's anomaly score, explanation and learning
// state join its document; a model without a score has none.
func TestModelsAnomaly(t *testing.T) {
	docs := []modelDoc{{Model: "a"}, {Model: "b"}}
	addAnomalies(docs, []alert.AnomalyView{
		{Model: "a", Score: 0.97, Explanation: "calls/s −48% with p99 flat: fewer calls answered, not slower ones",
			Pattern: "throughput_collapse", Top: []alert.AnomalyFeature{{Feature: "calls", Label: "calls/s", Contribution: 2.5}}},
		{Model: "c", Learning: true},
	})
	if an := docs[0].Anomaly; an == nil || an.Score != 0.97 || an.Pattern != "throughput_collapse" || len(an.Top) != 1 {
		t.Errorf("a: %+v", an)
	}
	if docs[1].Anomaly != nil {
		t.Errorf("b: %+v, want none", docs[1].Anomaly)
	}
	b, _ := json.Marshal(docs[0])
	if !strings.Contains(string(b), `"anomaly":{"score":0.97,"learning":false,"explanation":"calls/s`) {
		t.Errorf("JSON: %s", b)
	}
}
