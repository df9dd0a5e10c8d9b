package correlate

import (
	"math"
	"testing"
)

func TestHint(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name string
		s    Signal
		want string
	}{
		{"latency not up", Signal{HasGPU: true, Utilization: 1, Correlation: 0.9}, HintNone},
		{"no GPU data", Signal{LatencyUp: true, Correlation: nan}, HintUnknown},
		{"saturated, moving together", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.97, Correlation: 0.8}, HintGPUSaturated},
		{"saturated, pinned flat", Signal{LatencyUp: true, HasGPU: true, Utilization: 1, UtilizationFlat: true, Correlation: 0.1}, HintGPUSaturated},
		{"saturated, no variance to correlate", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.95, Correlation: nan}, HintGPUSaturated},
		{"busy GPU but latency does not follow it", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.95, Correlation: -0.2}, HintUnknown},
		{"throttled wins over saturated", Signal{LatencyUp: true, HasGPU: true, Utilization: 1, Correlation: 0.9, Throttled: true}, HintGPUThrottled},
		{"throttled at low load", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.3, Correlation: 0.1, Throttled: true}, HintGPUThrottled},
		{"memory pressure", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.6, Correlation: 0.2, HasMemory: true, MemoryRatio: 0.97}, HintGPUMemoryPressure},
		{"memory high but unknown total", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.2, Correlation: 0.1, MemoryRatio: 0.99}, HintNotGPU},
		{"GPU idle and flat", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.1, UtilizationFlat: true, Correlation: 0.7}, HintNotGPU},
		{"GPU idle, latency not following", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.2, Correlation: -0.6}, HintNotGPU},
		{"GPU idle, no correlation yet", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.2, Correlation: nan}, HintNotGPU},
		{"GPU rising with latency under 50%", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.45, Correlation: 0.9}, HintUnknown},
		{"GPU half busy", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.7, Correlation: 0.9}, HintUnknown},
		{"inputs grew, GPU saturated by them", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.98, Correlation: 0.9, Inputs: HintInputsGrew}, HintInputsGrew},
		{"inputs grew, no GPU data", Signal{LatencyUp: true, Correlation: nan, Inputs: HintInputsGrew}, HintInputsGrew},
		{"input shape changed, GPU idle", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.2, UtilizationFlat: true, Inputs: HintInputShapeChanged}, HintInputShapeChanged},
		{"inputs grew but latency not up", Signal{HasGPU: true, Utilization: 0.2, Inputs: HintInputsGrew}, HintNone},
		{"throttled wins over inputs", Signal{LatencyUp: true, HasGPU: true, Utilization: 0.9, Throttled: true, Inputs: HintInputsGrew}, HintGPUThrottled},
		{"one endpoint slow wins over its GPU", Signal{LatencyUp: true, HasGPU: true, Utilization: 1, Correlation: 0.9, Throttled: true, SlowEndpoint: true}, HintOneEndpointSlow},
		{"one endpoint slow, latency not up", Signal{SlowEndpoint: true}, HintNone},
	}
	for _, c := range cases {
		if got := Hint(c.s); got != c.want {
			t.Errorf("%s: Hint = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestPearson(t *testing.T) {
	if r := pearson([]float64{1, 2, 3, 4}, []float64{2, 4, 6, 8}); math.Abs(r-1) > 1e-9 {
		t.Errorf("linear: r = %v", r)
	}
	if r := pearson([]float64{1, 2, 3, 4}, []float64{8, 6, 4, 2}); math.Abs(r+1) > 1e-9 {
		t.Errorf("inverse: r = %v", r)
	}
	if r := pearson([]float64{1, 2, 3}, []float64{0.3, 0.3, 0.3}); !math.IsNaN(r) {
		t.Errorf("constant side: r = %v, want NaN", r)
	}
	if r := pearson([]float64{1, 2}, []float64{1, 2}); !math.IsNaN(r) {
		t.Errorf("two points: r = %v, want NaN", r)
	}
	if m := median([]float64{5, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
}
