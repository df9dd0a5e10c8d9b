package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// costModels are two models on simserver's one GPU at known shares: a
// 6 ms execution every 47 ms and a 3 ms one every 31 ms, about 13% and
// 10% of the GPU. The periods are prime to each other so that the two
// models overlap by chance (about 1% of the time), not by phase lock:
// overlapped time is where a split by compute time and simserver's split
// of each instant differ.
func costModels(names []string, baseMS []int) string {
	var b strings.Builder
	b.WriteString("models:\n")
	for i, n := range names {
		fmt.Fprintf(&b, `  - name: %s
    kind: classifier
    platform: tensorrt_plan
    protocols: [kserve]
    max_batch: 64
    slots: 1
    inputs:
      - {name: input, datatype: FP32, dims: [64]}
    outputs:
      - {name: probs, datatype: FP32, dims: [10]}
    latency: {base_ms: %d}
`, n, baseMS[i])
	}
	return b.String()
}

// simUse reads simserver's ground truth: each model's busy seconds and
// joules.
func simUse(t *testing.T, admin string) map[string][2]float64 {
	t.Helper()
	_, body := httpGet(t, "http://"+admin+"/metrics")
	out := map[string][2]float64{}
	for _, line := range strings.Split(body, "\n") {
		for i, prefix := range []string{`simserver_model_gpu_busy_seconds_total{model="`, `simserver_model_gpu_energy_joules_total{model="`} {
			rest, ok := strings.CutPrefix(line, prefix)
			if !ok {
				continue
			}
			model, value, _ := strings.Cut(rest, `"} `)
			var v float64
			fmt.Sscan(value, &v)
			u := out[model]
			u[i] = v
			out[model] = u
		}
	}
	return out
}

type costView struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason"`
	Models    []struct {
		Model        string   `json:"model"`
		Method       string   `json:"method"`
		Calls        uint64   `json:"calls"`
		GPUSeconds   float64  `json:"gpu_seconds"`
		EnergyJoules float64  `json:"energy_joules"`
		CostPer1K    *float64 `json:"cost_per_1k_calls"`
	} `json:"models"`
	Warnings []string `json:"warnings"`
}

func getCost(t *testing.T, admin string) (costView, map[string][2]float64) {
	t.Helper()
	code, body := httpGet(t, "http://"+admin+"/api/v1/cost")
	if code != http.StatusOK {
		t.Fatalf("/api/v1/cost: %d %s", code, body)
	}
	var v costView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("/api/v1/cost: %v\n%s", err, body)
	}
	out := map[string][2]float64{}
	for _, m := range v.Models {
		out[m.Model] = [2]float64{m.GPUSeconds, m.EnergyJoules}
	}
	return v, out
}

// TestCostAttribution: two models, then five, share simserver's GPU; over
// the same stretch, the GPU-seconds and joules infergate attributes to
// each are within 5% of simserver's own accounting.
func TestCostAttribution(t *testing.T) {
	t.Run("two", func(t *testing.T) {
		testCostAttribution(t, []string{"cost_a", "cost_b"}, []int{6, 3}, []time.Duration{47, 31})
	})
	// Five models keep the GPU about 45% busy: more overlap, where the
	// split by compute time and simserver's differ most.
	t.Run("five", func(t *testing.T) {
		testCostAttribution(t, []string{"cost_a", "cost_b", "cost_c", "cost_d", "cost_e"},
			[]int{6, 3, 4, 2, 5}, []time.Duration{47, 31, 53, 37, 61})
	})
}

// testCostAttribution runs one worker per model, sending a call of
// baseMS[i] every periodMS[i] milliseconds.
func testCostAttribution(t *testing.T, names []string, baseMS []int, periodMS []time.Duration) {
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte(costModels(names, baseMS)), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, "--config", path, "--gpu-interval", "100ms")
	conf := writeFile(t, "infergate.yaml", "cost: {gpu_hour: {\"other GPU\": 1}, kwh: 0.12}\n")
	gate := startProxy(t, sim.grpc, "--config", conf, "--gpu-source", "prometheus",
		"--gpu-metrics-url", "http://"+sim.admin+"/metrics", "--gpu-interval", "100ms")
	var loads []*load
	for i, n := range names {
		loads = append(loads, startModelLoad(t, gate.grpc, n, 1, 1, periodMS[i]*time.Millisecond))
	}
	time.Sleep(3 * time.Second)
	_, g0 := getCost(t, gate.admin)
	s0 := simUse(t, sim.admin)
	time.Sleep(15 * time.Second)
	v, g1 := getCost(t, gate.admin)
	s1 := simUse(t, sim.admin)
	for _, l := range loads {
		l.stop()
		if err := l.failed(); err != nil {
			t.Fatal(err)
		}
	}
	if !v.Available {
		t.Fatalf("cost not available: %s", v.Reason)
	}
	for _, m := range v.Models {
		if m.Method != "compute_time" {
			t.Errorf("%s: method %q, want compute_time (simserver exports it)", m.Model, m.Method)
		}
		if m.CostPer1K != nil {
			t.Errorf("%s: priced although its GPU has no price", m.Model)
		}
	}
	if len(v.Warnings) == 0 || !strings.Contains(strings.Join(v.Warnings, "\n"), "H100") {
		t.Errorf("no warning naming the unpriced GPU: %q", v.Warnings)
	}
	fams := scrape(t, gate.admin)
	if got := len(find(fams, "infergate_model_gpu_seconds_total", nil)); got != len(names) {
		t.Errorf("infergate_model_gpu_seconds_total: %d series, want %d:\n%s", got, len(names), dumpFamilies(fams, "infergate_model_gpu_seconds_total"))
	}
	promtoolClean(t, gate.admin, "infergate_model_gpu_seconds_total", "infergate_model_energy_joules_total")
	for _, n := range names {
		for i, what := range []string{"GPU-seconds", "joules"} {
			got, want := g1[n][i]-g0[n][i], s1[n][i]-s0[n][i]
			t.Logf("%s %s: infergate %.4f, simserver %.4f (%+.2f%%)", n, what, got, want, 100*(got-want)/want)
			if want <= 0 || math.Abs(got-want) > 0.05*want {
				t.Errorf("%s %s: infergate %.4f, simserver %.4f: more than 5%% apart", n, what, got, want)
			}
		}
	}
}

// TestCostWithoutGPUSource: with no GPU source the API says why, and no
// counters are exported.
func TestCostWithoutGPUSource(t *testing.T) {
	e := newEnv(t)
	v, _ := getCost(t, e.gate.admin)
	if v.Available || !strings.Contains(v.Reason, "no GPU source") || len(v.Models) != 0 {
		t.Errorf("cost without a GPU source: %+v", v)
	}
	if fams := scrape(t, e.gate.admin); len(find(fams, "infergate_model_gpu_seconds_total", nil)) != 0 {
		t.Error("infergate_model_gpu_seconds_total has series without a GPU source")
	}
}
