package sim

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGPUThermalModel: the temperature follows utilisation with inertia,
// the clock idles low with gpu_idle, and runs at its maximum when busy.
func TestGPUThermalModel(t *testing.T) {
	t0 := time.Unix(1000, 0)
	g := newGPU(t0)
	s := g.sample(t0.Add(time.Second))
	if s.TemperatureCelsius != GPUIdleCelsius || s.SMClockMHz != GPUIdleSMClockMHz || s.ClockEventReasons != reasonGPUIdle {
		t.Fatalf("idle: %+v", s)
	}
	// Fully busy for one time constant: 63% of the way to 75 °C.
	g.begin(1, t0.Add(time.Second))
	s = g.sample(t0.Add(time.Second + gpuThermalTau))
	want := GPUIdleCelsius + (GPUFullLoadCelsius-GPUIdleCelsius)*(1-math.Exp(-1))
	if math.Abs(s.TemperatureCelsius-want) > 1e-9 || s.SMClockMHz != GPUMaxSMClockMHz || s.ClockEventReasons != 0 {
		t.Fatalf("busy: %+v, want %.2f °C at max clock", s, want)
	}
	// Thermal throttle: clock halved, thermal reasons, compute twice as
	// long, temperature heading for 90 °C.
	g.setThrottle(ThrottleThermal)
	if g.slowdown() != 2 {
		t.Errorf("thermal slowdown = %v, want 2", g.slowdown())
	}
	prev := s.TemperatureCelsius
	s = g.sample(t0.Add(2*time.Second + gpuThermalTau))
	if s.SMClockMHz != GPUMaxSMClockMHz/2 || s.ClockEventReasons != reasonSWThermalSlowdown|reasonHWThermalSlowdown ||
		s.TemperatureCelsius <= prev {
		t.Errorf("thermal: %+v", s)
	}
	g.setThrottle(ThrottlePower)
	s = g.sample(t0.Add(3*time.Second + gpuThermalTau))
	if s.SMClockMHz != GPUMaxSMClockMHz*0.6 || s.ClockEventReasons != reasonSWPowerCap || s.PowerWatts != GPUPowerLimitWatts {
		t.Errorf("power: %+v", s)
	}
}

// TestThrottleFault: the fault API throttles the GPU, slows compute by
// the clock ratio, and healing restores it.
func TestThrottleFault(t *testing.T) {
	var slept []time.Duration
	h := start(t, Config{Models: noTailModels(), Sleep: func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		return ctx.Err()
	}})
	infer := func() time.Duration {
		slept = nil
		if _, err := h.ks.ModelInfer(context.Background(), classifierKServe("resnet50", 20, seq(20*64, 0, 1))); err != nil {
			t.Fatal(err)
		}
		return slept[0]
	}
	base := infer() // 5 + 0.25·20 = 10 ms
	code, body := do(t, "POST", h.admin+"/api/v1/faults", `{"model": "simple", "throttle": "Thermal"}`)
	if code != http.StatusOK || !strings.Contains(body, `"throttle": "thermal"`) {
		t.Fatalf("POST: %d %s", code, body)
	}
	if got := infer(); got != 2*base {
		t.Errorf("resnet50 under a thermal throttle named for simple: %v, want %v (one GPU)", got, 2*base)
	}
	s := h.srv.SampleGPU(time.Now().Add(time.Second))
	if s.ClockEventReasons&reasonSWThermalSlowdown == 0 || s.SMClockMHz >= GPUMaxSMClockMHz {
		t.Errorf("GPU under thermal fault: %+v", s)
	}
	do(t, "DELETE", h.admin+"/api/v1/faults", "")
	if got := infer(); got != base {
		t.Errorf("after healing: %v, want %v", got, base)
	}
}
