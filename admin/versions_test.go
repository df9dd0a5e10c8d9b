package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/correlate"
)

// recordCalls records n successful calls of one version of a model, with
// latencies spread evenly over [base, 1.5 base): the p99 is about 1.5 base.
func recordCalls(mon *monitor.Registry, model, version string, n int, base time.Duration) {
	k := monitor.SeriesKey{Model: model, Version: version, Method: "/inference.GRPCInferenceService/ModelInfer",
		Upstream: "u", CodeClass: monitor.CodeClassOK, Route: monitor.RoutePrimary}
	for i := range n {
		mon.Record(k, monitor.Sample{Total: base + base*time.Duration(i%1000)/2000, Code: "OK"})
	}
}

// byModel is the correlator's grouping for the tests: every series.
func byModel(k monitor.SeriesKey) string { return k.Model }

func TestCompareVersions(t *testing.T) {
	mon := monitor.NewRegistry(monitor.Options{NoRequestHistogram: true})
	// resnet50: version 2 takes most calls, 10 is the canary (newer than
	// 9 by value, not by name) and 30% slower, 9 has a few calls left.
	recordCalls(mon, "resnet50", "2", 6000, 10*time.Millisecond)
	recordCalls(mon, "resnet50", "10", 3000, 13*time.Millisecond)
	recordCalls(mon, "resnet50", "9", 50, 10*time.Millisecond)
	recordCalls(mon, "resnet50", "", 500, time.Second) // no version: left out
	// bert: two equal versions; mobilenet: one version; tiny: too few.
	recordCalls(mon, "bert", "1", 3000, 20*time.Millisecond)
	recordCalls(mon, "bert", "2", 3000, 20*time.Millisecond)
	recordCalls(mon, "mobilenet", "1", 3000, 20*time.Millisecond)
	recordCalls(mon, "tiny", "1", 100, 10*time.Millisecond)
	recordCalls(mon, "tiny", "2", 100, 20*time.Millisecond)
	mon.Rotate()

	docs := compareVersions(mon, byModel)
	if len(docs) != 3 || docs["mobilenet"] != nil {
		t.Fatalf("compared %v, want resnet50, bert and tiny (mobilenet has one version)", keys(docs))
	}
	r := docs["resnet50"]
	if r.Window != "5m" || len(r.Versions) != 3 || r.Versions[0].Version != "10" || r.Versions[1].Version != "9" || r.Versions[2].Version != "2" {
		t.Fatalf("resnet50 versions = %+v, want 10, 9, 2 over 5m", r)
	}
	if v := r.Versions[2]; v.Calls != 6000 || v.P99 < 0.0145 || v.P99 > 0.0151 {
		t.Errorf("version 2 = %+v, want 6000 calls and a p99 of about 15ms", v)
	}
	c := r.Comparison
	for _, m := range []string{"resnet50", "bert", "tiny"} {
		t.Logf("%s: %s", m, docs[m].Comparison.Summary)
	}
	if c.Version != "10" || c.BaselineVersion != "2" || c.Verdict != verdictSlower || c.ConfidenceLevel != 0.95 {
		t.Fatalf("comparison = %+v, want 10 slower than 2 at 95%%", c)
	}
	if *c.Ratio < 1.28 || *c.Ratio > 1.32 || *c.RatioLower > *c.Ratio || *c.RatioUpper < *c.Ratio || *c.RatioLower <= 1 {
		t.Errorf("ratio %v in [%v, %v], want about 1.3 with a lower bound above 1", *c.Ratio, *c.RatioLower, *c.RatioUpper)
	}
	if !strings.HasPrefix(c.Summary, "version 10's p99 is 1.3x version 2's (95% CI ") {
		t.Errorf("summary %q", c.Summary)
	}

	if c := docs["bert"].Comparison; c.Verdict != verdictNoDifference || !strings.HasSuffix(c.Summary, "no clear difference") {
		t.Errorf("bert: %+v, want no difference between equal versions", c)
	}
	c = docs["tiny"].Comparison
	if c.Verdict != verdictTooFewCalls || c.RatioLower != nil || c.Ratio == nil || c.MinCalls < 400 ||
		!strings.Contains(c.Summary, "too few calls") || !strings.Contains(c.Summary, "100 and 100 in 5m") {
		t.Errorf("tiny: %+v, want too few calls, with the point ratio and no bounds", c)
	}

	// In the models' JSON: on the model's row, absent elsewhere.
	b, err := json.Marshal(modelsJSON(nil, nil, docs, nil))
	if err != nil || string(b) != "[]" {
		t.Errorf("no models: %s %v", b, err)
	}
	var got []map[string]any
	b, _ = json.Marshal(modelsJSONOf(t, []string{"resnet50", "mobilenet"}, docs))
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got[0]["versions"]; ok {
		t.Errorf("mobilenet has versions: %s", b)
	}
	v, _ := got[1]["versions"].(map[string]any)
	cmp, _ := v["comparison"].(map[string]any)
	if cmp["verdict"] != "slower" || cmp["baseline_version"] != "2" {
		t.Errorf("resnet50 versions = %v", got[1]["versions"])
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// modelsJSONOf returns the models' JSON of states with only names.
func modelsJSONOf(t *testing.T, names []string, docs map[string]*versionsDoc) []modelDoc {
	t.Helper()
	var states []correlate.ModelState
	for _, n := range names {
		states = append(states, correlate.ModelState{Model: n})
	}
	return modelsJSON(nil, states, docs, nil)
}
