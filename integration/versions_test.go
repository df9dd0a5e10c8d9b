package integration

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/proto/kservepb"
)

// versionedDefaults writes simserver's default models with resnet50
// served as versions 1 and 2.
func versionedDefaults(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../examples/simserver/models.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const at = "  - name: resnet50\n"
	s := string(b)
	if !strings.Contains(s, at) {
		t.Fatalf("models.yaml has no %q", at)
	}
	return writeFile(t, "models.yaml", strings.Replace(s, at, at+"    versions: [\"1\", \"2\"]\n", 1))
}

// startVersionLoad sends one-item resnet50 calls for version from workers
// callers, each at most one per period, until stopped; failures are kept.
func startVersionLoad(t *testing.T, addr, version string, workers int, period time.Duration) *load {
	t.Helper()
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, addr))
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	req := resnetRequest("resnet50", 1)
	req.ModelVersion = version
	for range workers {
		l.wg.Go(func() {
			tk := time.NewTicker(period)
			defer tk.Stop()
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := kc.ModelInfer(cctx, req)
				ccancel()
				if err != nil && ctx.Err() == nil {
					l.mu.Lock()
					l.err = err
					l.mu.Unlock()
				}
				select {
				case <-tk.C:
				case <-ctx.Done():
				}
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

// versionsOf reads the version comparison of model from /api/v1/models.
func versionsOf(t *testing.T, admin, model string) *versionsBody {
	t.Helper()
	_, body := httpGet(t, "http://"+admin+"/api/v1/models")
	var models []struct {
		Model    string        `json:"model"`
		Versions *versionsBody `json:"versions"`
	}
	if err := json.Unmarshal([]byte(body), &models); err != nil {
		t.Fatalf("/api/v1/models: %v: %s", err, body)
	}
	for _, m := range models {
		if m.Model == model {
			return m.Versions
		}
	}
	return nil
}

type versionsBody struct {
	Window   string `json:"window"`
	Versions []struct {
		Version string  `json:"version"`
		Calls   uint64  `json:"calls"`
		P99     float64 `json:"p99_seconds"`
	} `json:"versions"`
	Comparison struct {
		Version         string   `json:"version"`
		BaselineVersion string   `json:"baseline_version"`
		Ratio           *float64 `json:"ratio"`
		RatioLower      *float64 `json:"ratio_lower"`
		RatioUpper      *float64 `json:"ratio_upper"`
		Level           float64  `json:"confidence_level"`
		Verdict         string   `json:"verdict"`
		Summary         string   `json:"summary"`
	} `json:"comparison"`
}

// TestVersionCanaryRatio: simserver serves resnet50 as versions 1 and 2,
// version 2 three times as slow by a fault (a bad canary); clients call both
// through infergate. /api/v1/models puts them side by side and says, with
// its confidence, that version 2's p99 is about 3x version 1's; calls
// that name no version stay out of it.
func TestVersionCanaryRatio(t *testing.T) {
	models := writeFile(t, "models.yaml", `models:
  - name: resnet50
    kind: classifier
    protocols: [kserve]
    max_batch: 64
    versions: ["1", "2"]
    inputs: [{name: input, datatype: FP32, dims: [64]}]
    outputs: [{name: probs, datatype: FP32, dims: [10]}]
    latency: {base_ms: 20, per_item_ms: 0.25}
`)
	sim := startSim(t, "--config", models)
	gate := startProxy(t, sim.grpc)
	fault(t, sim.admin, `{"model":"resnet50","version":"2","slowdown":3}`)
	// Version 1 takes most calls (the baseline), version 2 a share. The
	// compute time (20ms, 60ms) dwarfs what a busy machine adds to a
	// call's tail.
	v1 := startVersionLoad(t, gate.grpc, "1", 4, 20*time.Millisecond)
	v2 := startVersionLoad(t, gate.grpc, "2", 3, 20*time.Millisecond)
	unversioned := startVersionLoad(t, gate.grpc, "", 1, 50*time.Millisecond)

	// Until each version has the few hundred calls a p99 interval needs,
	// it says too few calls; a generous deadline, for a busy machine.
	var v *versionsBody
	sawTooFew := false
	deadline := time.Now().Add(120 * time.Second)
	for {
		v = versionsOf(t, gate.admin, "resnet50")
		if v != nil && v.Comparison.Verdict == "too_few_calls" {
			sawTooFew = true
		}
		if v != nil && v.Comparison.Verdict == "slower" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slower verdict: %+v", v)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !sawTooFew {
		t.Log("the first read already had enough calls (a slow first read); too_few_calls not seen")
	}
	for _, l := range []*load{v1, v2, unversioned} {
		if err := l.failed(); err != nil {
			t.Fatalf("load: %v", err)
		}
	}
	c := v.Comparison
	t.Logf("%s; versions %+v", c.Summary, v.Versions)
	if len(v.Versions) != 2 || v.Versions[0].Version != "2" || v.Versions[1].Version != "1" || v.Window != "5m" {
		t.Fatalf("versions = %+v, want 2 then 1 (no unversioned entry) over 5m", v.Versions)
	}
	if c.Version != "2" || c.BaselineVersion != "1" || c.Verdict != "slower" || c.Level != 0.95 {
		t.Fatalf("comparison = %+v, want version 2 slower than version 1 at 95%%", c)
	}
	// Compute is 3x; the proxy's, the network's and the scheduler's share
	// is the same for both, so the end-to-end ratio is under 3.
	if *c.Ratio < 1.5 || *c.Ratio > 3.3 || *c.RatioLower <= 1 || *c.RatioLower > *c.Ratio || *c.RatioUpper < *c.Ratio {
		t.Errorf("ratio %.2f in [%.2f, %.2f], want about 3 with a lower bound above 1", *c.Ratio, *c.RatioLower, *c.RatioUpper)
	}
	if !strings.HasPrefix(c.Summary, "version 2's p99 is ") || !strings.Contains(c.Summary, "x version 1's (95% CI ") {
		t.Errorf("summary %q", c.Summary)
	}
}
