package correlate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/gpu"
)

type fakeSums struct{ sums map[string]monitor.CallSums }

func (f *fakeSums) RecentSums(int, func(monitor.SeriesKey) string) map[string]monitor.CallSums {
	return f.sums
}
func (f *fakeSums) Rotations() <-chan time.Time { return nil }

const costUUID = "GPU-1"

// costState is one source's reading of one GPU at second sec: utilisation,
// energy counter and per-model compute seconds (nil: not exported).
func costState(sec int, util, energy float64, compute map[string]float64) gpu.State {
	r := &gpu.Reading{At: time.Unix(int64(1000+sec), 0), Devices: []gpu.Device{{UUID: costUUID, Name: "H100",
		Utilization: util, EnergyJoules: energy, Known: gpu.FieldUtilization | gpu.FieldEnergy}}}
	for m, v := range compute {
		if r.Compute == nil {
			r.Compute = map[gpu.ModelOnGPU]float64{}
		}
		r.Compute[gpu.ModelOnGPU{Model: m, UUID: costUUID}] = v
	}
	return gpu.State{Devices: r.Devices, Sources: []gpu.Status{{Name: "s", Up: true, Reading: r}},
		Models: map[string]string{"a": costUUID, "b": costUUID}}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestAttributorComputeShares(t *testing.T) {
	a := NewAttributor(CostOptions{Calls: &fakeSums{}, GPU: func() gpu.State { return gpu.State{} }, Interval: time.Second,
		Prices: Prices{GPUHour: map[string]float64{"H100": 3.6}, KWh: 0.36, Currency: "USD"}})
	a.step(costState(0, 0, 0, map[string]float64{"a": 0, "b": 0}))
	for i := 1; i <= CostWindow; i++ {
		// Each second the GPU is half busy, uses 100 J; a computes 3x b.
		a.step(costState(i, 0.5, 100*float64(i), map[string]float64{"a": 0.3 * float64(i), "b": 0.1 * float64(i)}))
	}
	a.opts.Calls = &fakeSums{sums: map[string]monitor.CallSums{"a": {Calls: 1000}, "b": {Calls: 500}}}
	a.countCalls()
	rep := a.Report()
	if !rep.Available || len(rep.Models) != 2 {
		t.Fatalf("report %+v", rep)
	}
	ma, mb := rep.Models[0], rep.Models[1]
	if !near(ma.GPUSeconds, 3.75) || !near(mb.GPUSeconds, 1.25) || !near(ma.EnergyJoules, 750) || !near(mb.EnergyJoules, 250) {
		t.Errorf("a %+v, b %+v", ma, mb)
	}
	if ma.Method != MethodCompute || *ma.GPUSecondsPer1K != 3.75 || !near(*mb.JoulesPer1K, 500) {
		t.Errorf("a %+v, b %+v", ma, mb)
	}
	// 3.75 GPU-s at 3.6/h = 0.00375; 750 J at 0.36/kWh = 0.000075.
	if ma.CostPer1K == nil || !near(*ma.CostPer1K, 0.00375+0.000075) {
		t.Errorf("cost of a = %v", ma.CostPer1K)
	}
}

// A GPU that stops reporting leaves a gap: the time between its readings
// is not attributed.
func TestAttributorGapAndUpstream(t *testing.T) {
	sums := &fakeSums{}
	var warned []string
	a := NewAttributor(CostOptions{Calls: sums, GPU: func() gpu.State { return gpu.State{} }, Interval: time.Second,
		Prices: Prices{GPUHour: map[string]float64{"A100": 2}}, Warn: func(msg string) { warned = append(warned, msg) }})
	a.step(costState(0, 1, 0, nil))
	sums.sums = map[string]monitor.CallSums{"a": {Calls: 10, Upstream: time.Second}, "b": {Calls: 10, Upstream: 3 * time.Second}}
	a.countCalls()
	// Silent for 60s, then a reading: a gap, nothing attributed.
	a.step(costState(60, 1, 6000, nil))
	for i := 1; i <= CostWindow; i++ {
		if i == 1 {
			a.countCalls()
		}
		a.step(costState(60+i, 1, 6000+100*float64(i), nil))
	}
	rep := a.Report()
	g := rep.GPUs[0]
	if g.Gaps != 1 || !near(g.GPUSeconds, CostWindow) || !near(g.EnergyJoules, 100*CostWindow) {
		t.Errorf("gpu %+v", g)
	}
	ma, mb := rep.Models[0], rep.Models[1]
	if ma.Method != MethodUpstream || !near(ma.GPUSeconds, 2.5) || !near(mb.GPUSeconds, 7.5) {
		t.Errorf("a %+v, b %+v", ma, mb)
	}
	if ma.CostPer1K != nil || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], `"H100"`) {
		t.Errorf("unpriced GPU: cost %v, warnings %q", ma.CostPer1K, rep.Warnings)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], `"H100"`) {
		t.Errorf("logged %q, want one warning naming H100", warned)
	}
}

func TestAttributorNoSource(t *testing.T) {
	rep := NewAttributor(CostOptions{Calls: &fakeSums{}}).Report()
	if rep.Available || !strings.Contains(rep.Reason, "no GPU source") {
		t.Errorf("report %+v", rep)
	}
	down := NewAttributor(CostOptions{Calls: &fakeSums{}, GPU: func() gpu.State {
		return gpu.State{Sources: []gpu.Status{{Name: "triton", LastError: "connection refused"}}}
	}}).Report()
	if down.Available || !strings.Contains(down.Reason, "triton is down: connection refused") {
		t.Errorf("report %+v", down)
	}
}
