package sim

import (
	"context"
	"math"
	"os/exec"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestMetricsExposition(t *testing.T) {
	h := start(t, Config{})
	ctx := context.Background()
	for range 2 {
		if _, err := h.ks.ModelInfer(ctx, classifierKServe("resnet50", 3, seq(3*64, 0, 1))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.tf.Predict(ctx, classifierTF("resnet50", 2, seq(2*64, 0, 1))); err != nil {
		t.Fatal(err)
	}
	_, _ = h.ks.ModelInfer(ctx, classifierKServe("resnet50", 65, seq(65*64, 0, 1))) // OTHER failure

	_, body := do(t, "GET", h.admin+"/metrics", "")
	for _, line := range []string{
		`# TYPE nv_inference_count counter`,
		`nv_inference_count{gpu_uuid="GPU-5f1c0e42-sim0-4a6b-9c1d-5e1d0a7b3c21",model="resnet50",version="1"} 8`,
		`nv_inference_count{gpu_uuid="GPU-5f1c0e42-sim0-4a6b-9c1d-5e1d0a7b3c21",model="simple",version="1"} 0`,
		`nv_inference_exec_count{gpu_uuid="GPU-5f1c0e42-sim0-4a6b-9c1d-5e1d0a7b3c21",model="resnet50",version="1"} 3`,
		`nv_inference_request_success{gpu_uuid="GPU-5f1c0e42-sim0-4a6b-9c1d-5e1d0a7b3c21",model="resnet50",version="1"} 3`,
		`nv_gpu_power_limit{gpu_uuid="GPU-5f1c0e42-sim0-4a6b-9c1d-5e1d0a7b3c21"} 700`,
		`nv_inference_request_failure{gpu_uuid="GPU-5f1c0e42-sim0-4a6b-9c1d-5e1d0a7b3c21",model="resnet50",reason="OTHER",version="1"} 1`,
		`simserver_cancelled_total{model="resnet50"} 0`,
		`nv_inference_pending_request_count{model="resnet50",version="1"} 0`,
		`nv_gpu_utilization{gpu_uuid="` + GPUUUID + `"}`,
		`nv_energy_consumption{gpu_uuid="` + GPUUUID + `"}`,
		`DCGM_FI_DEV_GPU_TEMP{UUID="` + GPUUUID + `",device="nvidia0",gpu="0",modelName="` + GPUName + `"}`,
		`DCGM_FI_DEV_MAX_SM_CLOCK{UUID="` + GPUUUID + `",device="nvidia0",gpu="0",modelName="` + GPUName + `"} 1980`,
		`DCGM_FI_DEV_CLOCKS_EVENT_REASONS{UUID="` + GPUUUID + `",device="nvidia0",gpu="0",modelName="` + GPUName + `"}`,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	promtoolCheck(t, body)
}

// promtoolCheck runs promtool check metrics when it is installed. Triton's
// own names trip three lints (no _total on counters, _count suffix, _us
// units) and DCGM's labels a fourth (camelCase); anything else is a
// failure.
func promtoolCheck(t *testing.T, exposition string) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed; skipping the lint")
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	out, _ := cmd.CombinedOutput()
	inherent := []string{
		`counter metrics should have "_total" suffix`,
		`non-histogram and non-summary metrics should not have "_count" suffix`,
		`metric names should not contain abbreviated units`,
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		// DCGM exporter's own labels (modelName, UUID) trip the
		// snake_case lint.
		if strings.HasPrefix(line, "DCGM_FI_") && strings.HasSuffix(line, "label names should be written in 'snake_case' not 'camelCase'") {
			continue
		}
		ok := strings.HasPrefix(line, "nv_")
		if ok {
			ok = false
			for _, s := range inherent {
				ok = ok || strings.HasSuffix(line, s)
			}
		}
		if !ok {
			t.Errorf("promtool: %s", line)
		}
	}
}

func TestGPUAccounting(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	g := newGPU(t0)
	// Two overlapping executions (100–300 ms and 200–400 ms) are busy for
	// their union, 300 ms.
	g.begin(8, at(100))
	g.begin(4, at(200))
	g.end(8, at(300))
	g.end(4, at(400))
	s := g.sample(at(1000))
	if math.Abs(s.Utilization-0.3) > 1e-9 {
		t.Errorf("utilization = %v, want 0.3", s.Utilization)
	}
	if want := 60 + 640*0.3; math.Abs(s.PowerWatts-want) > 1e-9 || math.Abs(s.EnergyJoules-want) > 1e-9 {
		t.Errorf("power %v energy %v, want %v W over 1 s", s.PowerWatts, s.EnergyJoules, want)
	}
	if want := uint64(gpuBaseMemoryBytes + 12*gpuItemMemoryBytes); s.MemoryUsedBytes != want {
		t.Errorf("memory = %d, want %d (12 items at peak)", s.MemoryUsedBytes, want)
	}
	// An execution spanning the sample boundary counts in both periods.
	g.begin(1, at(1500))
	s = g.sample(at(2000))
	if math.Abs(s.Utilization-0.5) > 1e-9 {
		t.Errorf("utilization = %v, want 0.5", s.Utilization)
	}
	g.end(1, at(2250))
	s = g.sample(at(3000))
	if math.Abs(s.Utilization-0.25) > 1e-9 || s.MemoryUsedBytes != gpuBaseMemoryBytes+gpuItemMemoryBytes {
		t.Errorf("utilization %v memory %d", s.Utilization, s.MemoryUsedBytes)
	}
	// Idle: 60 W, base memory.
	s = g.sample(at(4000))
	if s.Utilization != 0 || s.PowerWatts != GPUIdleWatts || s.MemoryUsedBytes != gpuBaseMemoryBytes {
		t.Errorf("idle sample = %+v", s)
	}
}

// TestGPUSampler drives the real sampler and real timers under synctest's
// fake clock: 10 sequential 10 ms executions in one second is 10% busy.
func TestGPUSampler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := New(Config{Models: noTailModels()})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		ks := &kserveService{s: srv}
		for range 10 {
			// resnet50, N=20: 5 + 0.25·20 = 10 ms.
			if _, err := ks.ModelInfer(t.Context(), classifierKServe("resnet50", 20, seq(20*64, 0, 1))); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second - 100*time.Millisecond)
		synctest.Wait()
		g := srv.GPU()
		if math.Abs(g.Utilization-0.1) > 1e-9 {
			t.Errorf("utilization = %v, want 0.1", g.Utilization)
		}
		if g.MemoryUsedBytes != gpuBaseMemoryBytes+20*gpuItemMemoryBytes {
			t.Errorf("memory = %d", g.MemoryUsedBytes)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if g := srv.GPU(); g.Utilization != 0 || g.PowerWatts != GPUIdleWatts {
			t.Errorf("idle second: %+v", g)
		}
	})
}

// TestGPUModelUse: overlapped time is split among the executions running,
// so the models' busy time sums to the GPU's, and each period's energy
// goes to the models by their busy time in it.
func TestGPUModelUse(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	g := newGPU(t0)
	g.beginAs("a", 1, at(0))
	g.beginAs("b", 1, at(200))
	g.endAs("a", 1, at(400))
	g.endAs("b", 1, at(600))
	st := g.sample(at(1000))
	u := g.modelUse()
	// a: 200ms alone + half of 200ms = 300ms; b the same.
	if math.Abs(u["a"].BusySeconds-0.3) > 1e-9 || math.Abs(u["b"].BusySeconds-0.3) > 1e-9 {
		t.Fatalf("busy: %+v", u)
	}
	if total := u["a"].EnergyJoules + u["b"].EnergyJoules; math.Abs(total-st.EnergyJoules) > 1e-6 {
		t.Fatalf("energy %v, GPU's %v", total, st.EnergyJoules)
	}
}
