package integration

import (
	"net/http"
	"testing"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// TestInjectedDelayShowsInItsSeries injects 50 ms into one model at the
// model server and wants that model's p50 on infergate's /metrics to carry
// it, in the upstream component, while another model's series does not.
func TestInjectedDelayShowsInItsSeries(t *testing.T) {
	e := newEnv(t)
	if code, body := httpDo(t, http.MethodPost, "http://"+e.sim.admin+"/api/v1/faults", `{"model":"simple","delay_ms":50}`); code != http.StatusOK {
		t.Fatalf("inject fault: %d %s", code, body)
	}
	cc := dial(t, e.gate.grpc)
	kc, tc := kservepb.NewGRPCInferenceServiceClient(cc), tfservingpb.NewPredictionServiceClient(cc)
	ctx := testCtx(t)
	for i := 0; i < 20; i++ {
		if _, err := kc.ModelInfer(ctx, simpleRequest("d")); err != nil {
			t.Fatal(err)
		}
		if _, err := tc.Predict(ctx, halfPlusTwoRequest(1, 2)); err != nil {
			t.Fatal(err)
		}
	}
	fams := scrape(t, e.gate.admin)
	slow := map[string]string{"model": "simple", "method": "/inference.GRPCInferenceService/ModelInfer", "window": "1m", "code_class": "ok"}
	fast := map[string]string{"model": "half_plus_two", "method": "/tensorflow.serving.PredictionService/Predict", "window": "1m", "code_class": "ok"}
	slowP50, ok1 := summaryQuantile(t, fams, "infergate_request_latency_seconds", slow, 0.5)
	// The component summaries export p99 by default (monitor.component_quantiles).
	slowUp, ok2 := summaryQuantile(t, fams, "infergate_upstream_latency_seconds", slow, 0.99)
	fastP50, ok3 := summaryQuantile(t, fams, "infergate_request_latency_seconds", fast, 0.5)
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("series missing from /metrics:\n%s", dumpFamilies(fams, "infergate_request_latency"))
	}
	if slowP50 < 0.050 || slowUp < 0.050 {
		t.Errorf("simple p50 total %.4fs, p99 upstream %.4fs: want both >= the injected 0.050s", slowP50, slowUp)
	}
	if fastP50 >= slowP50 {
		t.Errorf("half_plus_two p50 %.4fs is not below the delayed model's %.4fs", fastP50, slowP50)
	}
	if n := counterSum(fams, "infergate_requests_total", map[string]string{"model": "simple", "code": "OK"}); n != 20 {
		t.Errorf("infergate_requests_total{model=simple,code=OK} = %v, want 20", n)
	}
}

// TestSeriesCap: beyond --max-series, calls land in one "other" series and
// the overflow counter counts them, so untrusted model names cannot grow
// memory or Prometheus without bound.
func TestSeriesCap(t *testing.T) {
	e := newEnv(t, "--max-series", "3")
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, e.gate.grpc))
	ctx := testCtx(t)
	// Twelve distinct successful keys: four models, three methods each.
	for _, m := range []string{"simple", "resnet50", "mobilenet_v3", "identity_fp32"} {
		if _, err := kc.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: m}); err != nil {
			t.Fatal(err)
		}
		if _, err := kc.ModelReady(ctx, &kservepb.ModelReadyRequest{Name: m}); err != nil {
			t.Fatal(err)
		}
		if _, err := kc.ModelConfig(ctx, &kservepb.ModelConfigRequest{Name: m}); err != nil {
			t.Fatal(err)
		}
	}
	fams := scrape(t, e.gate.admin)
	if n := counterSum(fams, "infergate_series_overflow_total", map[string]string{"reason": "max_series"}); n != 9 {
		t.Errorf("infergate_series_overflow_total{reason=\"max_series\"} = %v, want 9", n)
	}
	if len(find(fams, "infergate_requests_total", map[string]string{"model": "other"})) == 0 {
		t.Errorf("no model=\"other\" series on /metrics")
	}
	models := map[string]bool{}
	for _, m := range fams["infergate_requests_total"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "model" {
				models[lp.GetValue()] = true
			}
		}
	}
	if len(models) > 4 { // three series plus "other"
		t.Errorf("%d distinct models on /metrics, want at most 4: %v", len(models), models)
	}
}

// TestPromtoolCheckMetrics runs Prometheus' own linter over /metrics after
// traffic of every kind (ok, errors, both protocols).
func TestPromtoolCheckMetrics(t *testing.T) {
	e := newEnv(t)
	cc := dial(t, e.gate.grpc)
	ctx := testCtx(t)
	kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctx, simpleRequest("p"))
	kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "nope"})
	tfservingpb.NewPredictionServiceClient(cc).Predict(ctx, halfPlusTwoRequest(3))
	promtoolClean(t, e.gate.admin, "infergate_requests_total")
}
