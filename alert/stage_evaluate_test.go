package alert

import (
	"context"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// testFrame is a frame over src, models and devs at now.
func testFrame(cfg *Config, src LatencySource, models []correlate.ModelState, devs []gpu.Device, now time.Time) *frame {
	f := &frame{now: now, src: src, slice: time.Second, cfg: cfg,
		recent: map[string]map[string]monitor.RecentStats{}, models: map[string]correlate.ModelState{},
		baselines: baseline.New(baseline.Options{Now: func() time.Time { return now }}), trends: newTrendStore(now)}
	for _, ms := range models {
		f.models[ms.Model] = ms
	}
	if devs != nil {
		f.gpus = gpuState(devs...)
	}
	return f
}

// TestEvaluateStage: the stage alone turns rules and data into one
// verdict per subject.
func TestEvaluateStage(t *testing.T) {
	busy := gpu.Device{UUID: "GPU-1", Utilization: 0.97, Known: gpu.FieldUtilization}
	cases := []struct {
		name   string
		rules  []RuleConfig
		stats  map[string]monitor.RecentStats
		models []correlate.ModelState
		devs   []gpu.Device
		want   map[string]tri // subjectLabel/subject -> holds
	}{
		{
			// A slow model holds, a fast one does not; a model without
			// calls is no subject at all.
			name:  "threshold per model",
			rules: []RuleConfig{{Name: "P99", Condition: Condition{Kind: KindThreshold, Quantile: "p99", Value: "500ms"}}},
			stats: map[string]monitor.RecentStats{"slow": calls(6000, ms(10), ms(900), nil), "fast": calls(6000, ms(10), ms(100), nil)},
			want:  map[string]tri{"model/slow": yes, "model/fast": no},
		},
		{
			// Five calls bound no p99: unknown, not false.
			name:  "too few calls",
			rules: []RuleConfig{{Name: "P99", Condition: Condition{Kind: KindThreshold, Quantile: "p99", Value: "500ms"}}},
			stats: map[string]monitor.RecentStats{"m": calls(5, ms(10), ms(900), nil)},
			want:  map[string]tri{"model/m": unknown},
		},
		{
			// Rules of GPU conditions only are per device.
			name:  "per GPU",
			rules: []RuleConfig{{Name: "Busy", Condition: Condition{Kind: KindGPU, Field: "utilization", Value: "0.95"}}},
			devs:  []gpu.Device{busy, {UUID: "GPU-2", Utilization: 0.1, Known: gpu.FieldUtilization}},
			want:  map[string]tri{"gpu/GPU-1": yes, "gpu/GPU-2": no},
		},
		{
			// A hint rule judges the models the correlator knows.
			name:   "hint",
			rules:  []RuleConfig{{Name: "Hint", Condition: Condition{Kind: KindHint, Hints: []string{correlate.HintGPUSaturated}}}},
			models: []correlate.ModelState{{Model: "a", Hint: correlate.HintGPUSaturated}, {Model: "b", Hint: correlate.HintNone}},
			want:   map[string]tri{"model/a": yes, "model/b": no},
		},
		{
			// all: one false condition decides; any: one true one does.
			name: "compound",
			rules: []RuleConfig{
				{Name: "All", All: []Condition{{Kind: KindGPU, Field: "utilization", Value: "0.9"}, {Kind: KindThreshold, Quantile: "p99", Value: "500ms"}}},
				{Name: "Any", Any: []Condition{{Kind: KindGPU, Field: "utilization", Value: "0.9"}, {Kind: KindThreshold, Quantile: "p99", Value: "500ms"}}},
			},
			stats:  map[string]monitor.RecentStats{"m": calls(6000, ms(10), ms(100), nil)},
			models: []correlate.ModelState{{Model: "m", GPU: &busy}},
			want:   map[string]tri{"model/m": no, "model/m ": yes},
		},
		{
			// Errors count every call, and need min_calls.
			name:  "errors",
			rules: []RuleConfig{{Name: "Err", Condition: Condition{Kind: KindErrors, Ratio: "1%"}}},
			stats: map[string]monitor.RecentStats{
				"bad": calls(500, ms(10), ms(20), map[string]uint64{"Internal": 50}),
				"few": calls(10, ms(10), ms(20), map[string]uint64{"Internal": 5}),
			},
			want: map[string]tri{"model/bad": yes, "model/few": unknown},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Rules: tc.rules}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			src := &fakeSource{}
			for m, rs := range tc.stats {
				src.set(m, rs)
			}
			now := newClock().now()
			s := newStep(testFrame(cfg, src, tc.models, tc.devs, now))
			evaluateStage{cfg: cfg}.exec(withNow(context.Background(), now), s)
			got := map[string]tri{}
			for _, v := range s.verdicts {
				k := v.subjectLabel + "/" + v.subject
				if v.rule.Name == "Any" {
					k += " " // the second rule of the compound case
				}
				got[k] = v.holds
			}
			if len(got) != len(tc.want) {
				t.Fatalf("verdicts %v, want %v", got, tc.want)
			}
			for k, w := range tc.want {
				if got[k] != w {
					t.Errorf("%s: %v, want %v", k, got[k], w)
				}
			}
		})
	}
}
