package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infergate/infergate/proto/kservepb"
)

// gpuModels is simserver's resnet50 without its random long tail, so that
// the baseline p99 of the light phase is the compute time and a rise is a
// rise: 5 ms + 0.25 ms per item, one execution slot.
const gpuModels = `models:
  - name: resnet50
    kind: classifier
    platform: tensorrt_plan
    protocols: [kserve]
    max_batch: 64
    slots: 1
    inputs:
      - {name: input, datatype: FP32, dims: [64]}
    outputs:
      - {name: probs, datatype: FP32, dims: [10]}
    latency: {base_ms: 5, per_item_ms: 0.25}
`

// gpuEnv is simserver (GPU sampled every 100ms) behind infergate scraping
// its metrics every 100ms, so the correlator's rings fill in seconds.
func gpuEnv(t *testing.T) env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte(gpuModels), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, "--config", path, "--gpu-interval", "100ms")
	// The baseline learns for 2s, not 30s: the light phase is calm from
	// its first call, and these tests judge the hints, not the learning.
	conf := writeFile(t, "infergate.yaml", "alerting:\n  baseline: {learn: 2s}\n")
	gate := startProxy(t, sim.grpc, "--config", conf, "--gpu-source", "prometheus",
		"--gpu-metrics-url", "http://"+sim.admin+"/metrics", "--gpu-interval", "100ms")
	return env{sim: sim, gate: gate}
}

// modelView is the part of /api/v1/models the tests read.
type modelView struct {
	Model          string   `json:"model"`
	Calls          uint64   `json:"calls"`
	P99            float64  `json:"p99_seconds"`
	Baseline       *float64 `json:"baseline_p99_seconds"`
	LatencyUp      bool     `json:"latency_up"`
	GPUUUID        *string  `json:"gpu_uuid"`
	GPUUtilization *float64 `json:"gpu_utilization"`
	Correlation    *float64 `json:"correlation"`
	CauseHint      string   `json:"cause_hint"`
	GPU            *struct {
		Throttled bool     `json:"throttled"`
		Reasons   []string `json:"clock_event_reasons"`
		Temp      *float64 `json:"temperature_celsius"`
	} `json:"gpu"`
}

func (m modelView) String() string {
	b, _ := json.Marshal(m)
	return string(b)
}

func getModel(t *testing.T, admin, model string) (modelView, bool) {
	t.Helper()
	code, body := httpGet(t, "http://"+admin+"/api/v1/models")
	if code != http.StatusOK {
		t.Fatalf("/api/v1/models: %d %s", code, body)
	}
	var ms []modelView
	if err := json.Unmarshal([]byte(body), &ms); err != nil {
		t.Fatalf("/api/v1/models: %v\n%s", err, body)
	}
	for _, m := range ms {
		if m.Model == model {
			return m, true
		}
	}
	return modelView{}, false
}

// load runs workers goroutines calling resnet50 with batch items until
// stop is called; with a period each worker sends at most one call per
// period (paced, like steady traffic), without one it loops (saturating).
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func startLoad(t *testing.T, addr string, workers, items int, period time.Duration) *load {
	t.Helper()
	return startModelLoad(t, addr, "resnet50", workers, items, period)
}

// startModelLoad is startLoad for another model that takes resnet50's
// input (mobilenet_v3).
func startModelLoad(t *testing.T, addr, model string, workers, items int, period time.Duration) *load {
	t.Helper()
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, addr))
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	req := resnetRequest(model, items)
	for range workers {
		l.wg.Go(func() {
			var tick <-chan time.Time
			if period > 0 {
				tk := time.NewTicker(period)
				defer tk.Stop()
				tick = tk.C
			}
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := kc.ModelInfer(cctx, req)
				ccancel()
				if err != nil && ctx.Err() == nil {
					l.mu.Lock()
					l.err = err
					l.mu.Unlock()
				}
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
					}
				}
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

func (l *load) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// waitHint polls /api/v1/models until model's cause hint is want.
func waitHint(t *testing.T, admin, model, want string) modelView {
	t.Helper()
	var last modelView
	var seen []string // the trajectory, for a failure message
	defer func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("states while waiting for %s:\n%s", want, strings.Join(seen, "\n"))
		}
	}()
	eventually(t, fmt.Sprintf("cause_hint %s", want), func() bool {
		last, _ = getModel(t, admin, model)
		if s := last.String(); len(seen) == 0 || s != seen[len(seen)-1] {
			seen = append(seen, s)
		}
		return last.CauseHint == want
	})
	return last
}

// waitBaseline waits until the correlator has learned resnet50's baseline
// p99 from at least three seconds of the light phase (paced at period),
// and checks the model is calm and mapped to simserver's GPU through
// Triton's per-model gpu_uuid label.
func waitBaseline(t *testing.T, admin string, period time.Duration) modelView {
	t.Helper()
	var m modelView
	minCalls := uint64(3 * time.Second / period)
	eventually(t, "a baseline p99 for resnet50", func() bool {
		m, _ = getModel(t, admin, "resnet50")
		return m.Baseline != nil && m.GPUUtilization != nil && m.Calls >= minCalls
	})
	if m.LatencyUp || m.CauseHint != "none" || m.GPUUUID == nil || *m.GPUUUID != "GPU-5f1c0e42-sim0-4a6b-9c1d-5e1d0a7b3c21" {
		t.Fatalf("light phase: %s", m)
	}
	return m
}

// TestGPUSaturatedHint: steady light traffic, then enough concurrent load
// to keep resnet50's one execution slot busy: p99 rises with utilisation
// at ~100%, so the hint is gpu_saturated.
func TestGPUSaturatedHint(t *testing.T) {
	e := gpuEnv(t)
	light := startLoad(t, e.gate.grpc, 1, 8, 40*time.Millisecond)
	waitBaseline(t, e.gate.admin, 40*time.Millisecond)
	heavy := startLoad(t, e.gate.grpc, 8, 8, 0)
	m := waitHint(t, e.gate.admin, "resnet50", "gpu_saturated")
	heavy.stop()
	light.stop()
	if !m.LatencyUp || m.GPUUtilization == nil || *m.GPUUtilization < 0.9 {
		t.Errorf("saturated: %s", m)
	}
	if err := heavy.failed(); err != nil {
		t.Errorf("load failed: %v", err)
	}
	fams := scrape(t, e.gate.admin)
	// One series per model, its hint a label: gpu_saturated, unless the
	// hint moved on once the load stopped (the API saw it).
	if hs := find(fams, "infergate_model_cause_hint", map[string]string{"model": "resnet50"}); len(hs) != 1 ||
		counterSum(fams, "infergate_model_cause_hint", map[string]string{"model": "resnet50"}) != 1 {
		t.Errorf("infergate_model_cause_hint, want one series of value 1 for resnet50:\n%s", dumpFamilies(fams, "infergate_model_"))
	}
	if len(find(fams, "infergate_gpu_utilization_ratio", map[string]string{"source": "prometheus"})) != 1 ||
		len(find(fams, "infergate_gpu_temperature_celsius", map[string]string{"source": "prometheus"})) != 1 {
		t.Errorf("GPU gauges:\n%s", dumpFamilies(fams, "infergate_gpu_"))
	}
}

// TestGPUThrottledHint: steady traffic, then a thermal throttle fault at
// simserver: the clock halves, compute takes twice as long, the thermal
// reasons are set, so the hint is gpu_throttled. Full batches (21 ms of
// compute) keep the doubling well above the proxy's own jitter on a busy
// machine.
func TestGPUThrottledHint(t *testing.T) {
	e := gpuEnv(t)
	startLoad(t, e.gate.grpc, 1, 64, 80*time.Millisecond)
	waitBaseline(t, e.gate.admin, 80*time.Millisecond)
	if code, body := httpDo(t, http.MethodPost, "http://"+e.sim.admin+"/api/v1/faults", `{"model":"*","throttle":"thermal"}`); code != http.StatusOK {
		t.Fatalf("inject throttle: %d %s", code, body)
	}
	m := waitHint(t, e.gate.admin, "resnet50", "gpu_throttled")
	if m.GPU == nil || !m.GPU.Throttled || len(m.GPU.Reasons) == 0 || m.GPU.Temp == nil {
		t.Errorf("throttled GPU: %s", m)
	}
	fams := scrape(t, e.gate.admin)
	if len(find(fams, "infergate_gpu_throttled", map[string]string{"reason": "sw_thermal_slowdown"})) != 1 {
		t.Errorf("infergate_gpu_throttled:\n%s", dumpFamilies(fams, "infergate_gpu_throttled"))
	}
	promtoolClean(t, e.gate.admin,
		"infergate_gpu_sm_clock_hertz", "infergate_model_gpu_correlation", "infergate_model_cause_hint", "infergate_gpu_source_up")
}

// TestNotGPUHint: steady light traffic, then a network-like delay at
// simserver (delay_ms holds no execution slot): p99 rises while the GPU
// stays idle and flat, so the hint is not_gpu.
func TestNotGPUHint(t *testing.T) {
	e := gpuEnv(t)
	startLoad(t, e.gate.grpc, 1, 8, 40*time.Millisecond)
	waitBaseline(t, e.gate.admin, 40*time.Millisecond)
	if code, body := httpDo(t, http.MethodPost, "http://"+e.sim.admin+"/api/v1/faults", `{"model":"resnet50","delay_ms":30}`); code != http.StatusOK {
		t.Fatalf("inject delay: %d %s", code, body)
	}
	m := waitHint(t, e.gate.admin, "resnet50", "not_gpu")
	if !m.LatencyUp || m.GPUUtilization == nil || *m.GPUUtilization >= 0.5 {
		t.Errorf("not_gpu: %s", m)
	}
}

// TestGPUSourceDown: a metrics URL that accepts connections and never
// answers is timed out; the proxy serves as before, the source reports
// down, and a rise has no GPU data to explain it.
func TestGPUSourceDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	sim := startSim(t)
	gate := startProxy(t, sim.grpc, "--gpu-source", "prometheus",
		"--gpu-metrics-url", "http://"+lis.Addr().String()+"/metrics", "--gpu-interval", "100ms")
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))
	for range 5 {
		if _, err := kc.ModelInfer(testCtx(t), simpleRequest("x")); err != nil {
			t.Fatalf("call through the proxy with a dead GPU source: %v", err)
		}
	}
	eventually(t, "infergate_gpu_scrape_errors_total >= 2", func() bool {
		return counterSum(scrape(t, gate.admin), "infergate_gpu_scrape_errors_total", map[string]string{"source": "prometheus"}) >= 2
	})
	fams := scrape(t, gate.admin)
	up := find(fams, "infergate_gpu_source_up", map[string]string{"source": "prometheus"})
	if len(up) != 1 || up[0].GetGauge().GetValue() != 0 {
		t.Errorf("infergate_gpu_source_up:\n%s", dumpFamilies(fams, "infergate_gpu_"))
	}
	code, body := httpGet(t, "http://"+gate.admin+"/api/v1/gpus")
	var doc struct {
		Sources []struct {
			Up        bool   `json:"up"`
			LastError string `json:"last_error"`
		} `json:"sources"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || len(doc.Sources) != 1 || doc.Sources[0].Up || doc.Sources[0].LastError == "" {
		t.Errorf("/api/v1/gpus: %d %s", code, body)
	}
	if _, err := kc.ModelInfer(testCtx(t), simpleRequest("y")); err != nil {
		t.Errorf("call after the source went down: %v", err)
	}
}

// TestGPUCheckScript runs scripts/gpu-check.sh, the NVML check for a real
// GPU, so that it cannot rot: on a machine without an NVIDIA driver (CI)
// it must end with its clear "no NVIDIA driver" verdict and status 2,
// after checking that infergate runs without NVML; with a driver, pass.
func TestGPUCheckScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../scripts/gpu-check.sh")
	cmd.Env = append(os.Environ(), "INFERGATE="+filepath.Join(binDir, "infergate"), "GPU_CHECK_LOAD_SECONDS=5")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gpu-check.sh: %v\n%s", err, out)
	}
	text := string(out)
	switch {
	case code == 2 && strings.Contains(text, "RESULT: no NVIDIA driver") &&
		strings.Contains(text, "PASS  without a driver the nvml source reports down"):
		t.Logf("no driver here, as the script says:\n%s", text)
	case code == 0 && strings.Contains(text, "RESULT: PASS"):
		t.Logf("a GPU here:\n%s", text)
	default:
		t.Fatalf("gpu-check.sh exited %d:\n%s", code, text)
	}
}
