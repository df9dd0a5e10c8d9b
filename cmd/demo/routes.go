package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// demoRules are the built-in rules spelled out, with one change: the
// latency rule's action sends a model with a fallback route (resnet50 →
// mobilenet_v3 in the demo) to its fallback while it fires.
const demoRules = `rules:
  - name: ModelErrorRatio
    kind: errors
    ratio: 1%
    window: 2s
    keep_firing_for: 30s
    severity: critical
    labels: {kind: errors}
    annotations: {summary: "{{.Labels.model}}: {{.Summary}}"}
  - name: ModelLatencyAboveBaseline
    kind: baseline
    window: 5s
    keep_firing_for: 30s
    severity: warning
    labels: {kind: latency}
    action: fallback
    annotations: {summary: "{{.Labels.model}}: {{.Summary}}"}
  - name: GPUSaturated
    kind: gpu
    field: utilization
    value: "0.95"
    for: 30s
    severity: warning
    labels: {kind: gpu}
    annotations: {summary: "GPU {{.Labels.gpu}}: {{.Summary}}"}
`

// demoFallback is the demo's route: resnet50 falls back to mobilenet_v3
// on the same simserver.
const demoFallback = "resnet50=%s/mobilenet_v3"

// writeDemoRules writes demoRules into dir and returns the file's path.
func writeDemoRules(dir string) (string, error) {
	path := filepath.Join(dir, "demo-rules.yaml")
	if err := os.WriteFile(path, []byte(demoRules), 0o644); err != nil {
		return "", fmt.Errorf("demo: write rules: %w", err)
	}
	return path, nil
}

// routeDoc is the part of /api/v1/routes the demo shows.
type routeDoc struct {
	Model    string `json:"model"`
	Route    string `json:"route"`
	Why      string `json:"why"`
	Fallback string `json:"fallback"`
}

func fetchRoutes(ctx context.Context, hc *http.Client, admin string) ([]routeDoc, error) {
	body, err := httpGet(ctx, hc, "http://"+admin+"/api/v1/routes")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var v struct {
		Routes []routeDoc `json:"routes"`
	}
	if err := json.NewDecoder(body).Decode(&v); err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	return v.Routes, nil
}

// watchRoutes polls infergate's routes every second and announces each
// change: the fallback taking over around the injected fault, and the
// return.
func watchRoutes(ctx context.Context, hc *http.Client, admin string, announce func(string)) {
	last := map[string]string{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		rs, err := fetchRoutes(rctx, hc, admin)
		cancel()
		if err != nil {
			continue
		}
		for _, r := range rs {
			if prev, ok := last[r.Model]; ok && prev != r.Route {
				msg := fmt.Sprintf("ROUTE %s: %s -> %s", r.Model, prev, r.Route)
				if r.Route == "fallback" {
					msg += fmt.Sprintf(" (%s answers; %s)", r.Fallback, r.Why)
				}
				announce(msg)
			}
			last[r.Model] = r.Route
		}
	}
}
