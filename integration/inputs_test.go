package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// inputsModels is simserver's models file for TestInputsGrewHint: a model
// whose latency grows with its rows (2 ms each), as an embedding model's
// does with the batch it is sent.
const inputsModels = `models:
  - name: embedder
    kind: classifier
    platform: tensorrt_plan
    protocols: [kserve]
    max_batch: 64
    inputs:
      - {name: input, datatype: FP32, dims: [1024]}
    outputs:
      - {name: probs, datatype: FP32, dims: [10]}
    latency:
      base_ms: 2
      per_item_ms: 2
`

// TestInputsGrewHint: simserver and infergate with the default rules;
// steady calls of 2 rows until the correlator knows the model's latency
// and inputs, then calls of 8 rows (4× the bytes, 3× the latency): the
// latency alert fires, and its evidence blames the inputs, not the
// server or the GPU.
func TestInputsGrewHint(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(models, []byte(inputsModels), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, "--config", models)
	g := startProxy(t, sim.grpc)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// load runs bench load at 50 calls/s with shape until ctx ends or
	// the next load replaces it.
	load := func(shape string) context.CancelFunc {
		lctx, lcancel := context.WithCancel(ctx)
		cmd := exec.CommandContext(lctx, filepath.Join(binDir, "bench"), "load", "-q", "-target", g.grpc,
			"-model", "embedder", "-input", "input", "-shape", shape, "-rate", "50", "-d", "10m")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		return func() { lcancel(); <-done }
	}

	type modelDoc struct {
		Model          string `json:"model"`
		BaselineSource string `json:"baseline_source"`
		CauseHint      string `json:"cause_hint"`
		Inputs         *struct {
			RequestBytesP90         int64  `json:"request_bytes_p90"`
			BaselineRequestBytesP90 int64  `json:"baseline_request_bytes_p90"`
			Moved                   string `json:"moved"`
		} `json:"inputs"`
	}
	embedder := func() (modelDoc, bool) {
		_, body := httpGet(t, "http://"+g.admin+"/api/v1/models")
		var ms []modelDoc
		if err := json.Unmarshal([]byte(body), &ms); err != nil {
			t.Fatalf("/api/v1/models: %v: %s", err, body)
		}
		for _, m := range ms {
			if m.Model == "embedder" {
				return m, true
			}
		}
		return modelDoc{}, false
	}

	stop := load("2,1024")
	// The latency baseline and the inputs' are learned in about a minute.
	waitFor(t, 3*time.Minute, "embedder's latency and inputs learned", func() bool {
		m, ok := embedder()
		return ok && m.BaselineSource != "learning" && m.BaselineSource != "" && m.Inputs != nil
	})
	if m, _ := embedder(); m.CauseHint != "none" || m.Inputs.Moved != "" {
		t.Fatalf("steady load: hint %s, inputs %+v", m.CauseHint, *m.Inputs)
	}
	stop()
	stop = load("8,1024")
	defer stop()

	type alertDoc struct {
		Name     string            `json:"name"`
		State    string            `json:"state"`
		Labels   map[string]string `json:"labels"`
		Evidence struct {
			CauseHint string `json:"cause_hint"`
			Inputs    *struct {
				RequestBytesP90         int64  `json:"request_bytes_p90"`
				BaselineRequestBytesP90 int64  `json:"baseline_request_bytes_p90"`
				Moved                   string `json:"moved"`
			} `json:"inputs"`
		} `json:"evidence"`
	}
	var fired alertDoc
	var last string
	waitFor(t, 90*time.Second, "ModelLatencyAboveBaseline firing with hint inputs_grew", func() bool {
		_, body := httpGet(t, "http://"+g.admin+"/api/v1/alerts")
		last = body
		var doc struct {
			Alerts []alertDoc `json:"alerts"`
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("/api/v1/alerts: %v: %s", err, body)
		}
		for _, a := range doc.Alerts {
			if a.Name == "ModelLatencyAboveBaseline" && a.Labels["model"] == "embedder" && a.State == "firing" &&
				a.Evidence.CauseHint == "inputs_grew" {
				fired = a
				return true
			}
		}
		return false
	})
	in := fired.Evidence.Inputs
	if in == nil || in.Moved != "inputs_grew" || in.RequestBytesP90 < 3*in.BaselineRequestBytesP90 {
		t.Errorf("evidence inputs %+v, want request bytes p90 about 4x the usual (last alerts: %s)", in, last)
	}
}
