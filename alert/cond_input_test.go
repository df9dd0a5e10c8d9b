package alert

import (
	"context"
	"strings"
	"testing"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/correlate"
)

// inputState is a model's input verdict: n recent calls of recentBytes
// against a baseline learned from 90 steps of 20 calls of baseBytes.
func inputState(n uint64, recentBytes, baseBytes int64) correlate.InputState {
	var rec, base monitor.InputCounts
	rec.Bytes[monitor.InputBucket(recentBytes, monitor.InputByteBuckets)] = n
	base.Bytes[monitor.InputBucket(baseBytes, monitor.InputByteBuckets)] = 90 * 20
	return correlate.JudgeInputs(&rec, &base, 90)
}

// TestInputSizeCondition: the request-size p90 against its baseline
// holds for ×4 inputs, not for steady ones, cannot tell on few calls or
// before the baseline is learned, and is unknown for a factor its
// powers of two cannot prove.
func TestInputSizeCondition(t *testing.T) {
	rule := func(c Condition) []RuleConfig { return []RuleConfig{{Name: "Inputs", Condition: c}} }
	learning := correlate.JudgeInputs(&monitor.InputCounts{}, &monitor.InputCounts{}, 3)
	for _, tc := range []struct {
		name string
		cond Condition
		in   correlate.InputState
		want tri
		note string
	}{
		{"x4 bytes", Condition{Kind: KindInputSize}, inputState(100, 4<<20, 1<<20), yes, "request bytes p90"},
		{"steady", Condition{Kind: KindInputSize}, inputState(100, 1<<20, 1<<20), no, "request bytes p90"},
		{"x4 but factor 4", Condition{Kind: KindInputSize, Factor: 4}, inputState(100, 4<<20, 1<<20), no, ""},
		{"x16 with factor 4", Condition{Kind: KindInputSize, Factor: 4}, inputState(100, 16<<20, 1<<20), yes, ""},
		{"few calls", Condition{Kind: KindInputSize}, inputState(5, 4<<20, 1<<20), unknown, "too few calls"},
		{"min_calls", Condition{Kind: KindInputSize, MinCalls: 500}, inputState(100, 4<<20, 1<<20), unknown, "too few calls"},
		{"learning", Condition{Kind: KindInputSize}, learning, unknown, "still learning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Rules: rule(tc.cond)}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			src := &fakeSource{}
			src.set("m", calls(100, ms(10), ms(20), nil))
			now := newClock().now()
			s := newStep(testFrame(cfg, src, []correlate.ModelState{{Model: "m", Inputs: tc.in}}, nil, now))
			evaluateStage{cfg: cfg}.exec(withNow(context.Background(), now), s)
			if len(s.verdicts) != 1 {
				t.Fatalf("verdicts %+v", s.verdicts)
			}
			v := s.verdicts[0]
			if v.holds != tc.want || !strings.Contains(v.outcomes[0].note, tc.note) {
				t.Errorf("holds %v (%s), want %v (%q)", v.holds, v.outcomes[0].note, tc.want, tc.note)
			}
		})
	}
}

// Bad input_size conditions are refused naming the field.
func TestInputSizeConditionRefused(t *testing.T) {
	for _, tc := range []struct {
		cond Condition
		want string
	}{
		{Condition{Kind: KindInputSize, Metric: "tokens"}, `metric: "tokens", want request_bytes or rows`},
		{Condition{Kind: KindInputSize, Factor: 1}, "factor: 1, want a finite number above 1"},
		{Condition{Kind: KindInputSize, Factor: -2}, "factor: -2"},
		{Condition{Kind: KindInputSize, Quantile: "p99"}, `quantile: "p99"`},
		{Condition{Kind: KindInputSize, Window: 10e9}, "window: input_size conditions read the correlator's recent window"},
		{Condition{Kind: KindInputSize, Op: "<"}, "op: input_size conditions are 'above'"},
	} {
		cfg := Config{Rules: []RuleConfig{{Name: "I", Condition: tc.cond}}}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `rules[0] ("I"): `+tc.want) {
			t.Errorf("%+v: Validate = %v, want %q", tc.cond, err, tc.want)
		}
	}
}

// TestEvidenceInputs: a model alert's evidence carries the inputs and,
// when they moved, says so on its line.
func TestEvidenceInputs(t *testing.T) {
	cfg := &Config{Rules: []RuleConfig{{Name: "Inputs", Condition: Condition{Kind: KindInputSize}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	in := inputState(100, 4<<20, 1<<20)
	now := newClock().now()
	f := testFrame(cfg, &fakeSource{}, []correlate.ModelState{{Model: "m", Inputs: in, Hint: correlate.HintInputsGrew}}, nil, now)
	a := &instance{rule: cfg.rules[0], subject: "m"}
	a.fillEvidence(f, "model", []outcome{{holds: yes}})
	ev := a.evidence
	if ev.Inputs == nil || ev.Inputs.Moved != correlate.HintInputsGrew || ev.Inputs.RequestBytesP90 < 4*ev.Inputs.BaselineRequestBytesP90-4 {
		t.Fatalf("inputs evidence %+v", ev.Inputs)
	}
	if s := ev.String(); !strings.Contains(s, "cause hint inputs_grew") || !strings.Contains(s, "inputs: request bytes p90") {
		t.Errorf("evidence line %q", s)
	}
}
