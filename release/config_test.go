package release

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestProblemsNameTheField(t *testing.T) {
	known := Lookup{
		Model: func(model, version string) bool {
			return model == "resnet50" && (version == "" || version == "1" || version == "2")
		},
		Upstream: func(name string) bool { return name == "gpu-b" },
	}
	good := canary(10)
	cases := []struct {
		name  string
		specs []Spec
		want  []string
	}{
		{"good", []Spec{good}, nil},
		{"weight", []Spec{canary(100.5)}, []string{"releases[0].weight: must be between 0 and 100, got 100.5"}},
		{"negative weight", []Spec{canary(-1)}, []string{"releases[0].weight: must be between 0 and 100, got -1"}},
		{"steps not increasing", []Spec{func() Spec { s := canary(0); s.Steps = []float64{1, 25, 5, 100}; return s }()},
			[]string{"releases[0].steps: not increasing (5 after 25)"}},
		{"step out of range", []Spec{func() Spec { s := canary(0); s.Steps = []float64{0, 50, 101}; return s }()},
			[]string{"releases[0].steps[0]: must be above 0 and at most 100, got 0", "releases[0].steps[2]: must be above 0 and at most 100, got 101"}},
		{"weight with steps", []Spec{func() Spec { s := canary(5); s.Steps = []float64{1, 5}; return s }()},
			[]string{"releases[0].weight: must be left out with steps (the release starts at steps[0], 1)"}},
		{"nothing to send", []Spec{canary(0)},
			[]string{"releases[0].weight: the release sends the candidate nothing: set weight, steps or shadow"}},
		{"model twice", []Spec{good, good}, []string{`releases[1].model: "resnet50" is already released by releases[0]`}},
		{"unknown version", []Spec{func() Spec { s := canary(10); s.Candidate = Target{Version: "3"}; return s }()},
			[]string{`releases[0].candidate.version: model "resnet50" has no version "3" on the server`}},
		{"unknown upstream", []Spec{func() Spec { s := canary(10); s.Candidate = Target{Upstream: "gpu-c"}; return s }()},
			[]string{`releases[0].candidate.upstream: no upstream is named "gpu-c"`}},
		{"two kinds of target", []Spec{func() Spec { s := canary(10); s.Candidate = Target{Version: "2", Upstream: "gpu-b"}; return s }()},
			[]string{"releases[0].candidate: must set exactly one of version, model and upstream"}},
		{"same target", []Spec{func() Spec { s := canary(10); s.Candidate = s.Stable; return s }()},
			[]string{"releases[0].candidate: is the stable target (version 1)"}},
		{"sticky", []Spec{func() Spec { s := canary(10); s.Sticky = "X-User"; return s }()},
			[]string{`releases[0].sticky: must be a lowercase header name or "sequence_id", got "X-User"`}},
		{"shadow", []Spec{func() Spec {
			s := canary(0)
			s.Shadow = &Shadow{Fraction: 1.5, Compare: "argmax", Tolerance: Tolerance{Abs: -1}}
			return s
		}()}, []string{
			"releases[0].shadow.fraction: must be above 0 and at most 1, got 1.5",
			`releases[0].shadow.compare: must be "values" or "top1", got "argmax"`,
			"releases[0].shadow.tolerance.abs: must be 0 or more, got -1"}},
		{"judgement", []Spec{func() Spec {
			s := canary(10)
			s.Judgement = Judgement{TailQuantile: 0.5, Alpha: 0.5, MinCalls: -1, Power: 1, StepTimeLimit: -time.Second, MinChange: MinChange{Tail: -10}}
			return s
		}()}, []string{
			"releases[0].judgement.tail_quantile: must be between 0.9 and 0.9999, got 0.5",
			"releases[0].judgement.alpha: must be between 0.000001 and 0.2, got 0.5",
			"releases[0].judgement.min_change.tail: must be above 0 and at most 1000 (percent), got -10",
			"releases[0].judgement.min_calls: must be positive, got -1",
			"releases[0].judgement.power: must be between 0 and 1 (both excluded), got 1",
			"releases[0].judgement.step_time_limit: must be positive, got -1s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range Problems(tc.specs, known) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	s := Spec{Model: "m", Stable: Target{Version: "1"}, Candidate: Target{Version: "2"}, Shadow: &Shadow{Fraction: 0.1}}.WithDefaults()
	j := s.Judgement
	if j.TailQuantile != 0.99 || j.Alpha != 0.01 || j.MinChange != (MinChange{10, 0.5, 1}) || j.MinCalls != DefaultMinCalls || j.Power != 0.9 ||
		j.StepTimeLimit != time.Hour || !s.IsIdempotent() || s.Shadow.Target != s.Candidate || s.Shadow.Compare != CompareValues {
		t.Errorf("defaults: %+v shadow %+v", s, *s.Shadow)
	}
	no := false
	s.Idempotent = &no
	if s.WithDefaults().IsIdempotent() {
		t.Error("idempotent: false was not kept")
	}
}

func TestNewRefusesABadSpec(t *testing.T) {
	_, err := New([]Spec{canary(101)})
	if err == nil || !strings.Contains(err.Error(), "releases[0].weight") {
		t.Errorf("New of a bad spec: %v", err)
	}
	s := mustSet(t, canary(10))
	if err := s.Apply([]Spec{canary(10), canary(20)}); err == nil {
		t.Error("Apply of a model released twice succeeded")
	}
	if got := s.Status(); len(got) != 1 || got[0].Weight != 10 {
		t.Errorf("a refused Apply changed the releases: %+v", got)
	}
	if !errors.Is(s.Pause("bert"), ErrNoRelease) {
		t.Error("Pause of a model without a release did not say so")
	}
}
