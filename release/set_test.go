package release

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// feed observes n calls of each version in class 0 at the given
// latencies (candidate's times slower) with no failures.
func feed(s *Set, n int, slower float64) {
	r := s.Choose("resnet50", nil, false).Release
	for i := range n {
		lat := time.Duration(10+i%20) * time.Millisecond
		r.Observe(Stable, 0, lat, true)
		r.Observe(Candidate, 0, time.Duration(float64(lat)*slower), true)
	}
}

// A paused release decides nothing, even on clear evidence; resumed, it
// rolls back, the weight is 0 at the next pick, and the hook hears of it.
func TestPauseResumeAndTheRollbackHook(t *testing.T) {
	var heard []Decision
	s, err := New([]Spec{canary(50)}, WithClock(func() time.Time { return epoch }), WithRollback(func(d Decision) { heard = append(heard, d) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pause("resnet50"); err != nil {
		t.Fatal(err)
	}
	now := epoch
	for range 30 {
		feed(s, 50, 2)
		now = now.Add(time.Second)
		if ds := s.Judge(now); len(ds) != 0 {
			t.Fatalf("a paused release decided %+v", ds)
		}
	}
	if st := s.Status()[0]; st.State != Paused || st.Evidence.LatencyTest < st.Evidence.Bar {
		t.Fatalf("paused release: %s with latency evidence %g (bar %g)", st.State, st.Evidence.LatencyTest, st.Evidence.Bar)
	}
	if err := s.Resume("resnet50"); err != nil {
		t.Fatal(err)
	}
	ds := s.Judge(now.Add(time.Second))
	if len(ds) != 1 || ds[0].Kind != Rollback || ds[0].To != 0 || !strings.Contains(ds[0].Reason, "version 2's p") {
		t.Fatalf("after resume: %+v", ds)
	}
	if len(heard) != 1 || heard[0].Reason != ds[0].Reason {
		t.Errorf("the hook heard %+v", heard)
	}
	for range 100 {
		if c := s.Choose("resnet50", nil, false); c.Version != Stable {
			t.Fatal("a rolled-back candidate still gets calls")
		}
	}
	if _, err := s.Promote("resnet50"); !errors.Is(err, ErrFinished) {
		t.Errorf("Promote after a rollback: %v", err)
	}
}

// An operator's promotion moves one step; an operator's rollback calls
// the hook too, marked manual.
func TestOperatorPromoteAndRollback(t *testing.T) {
	var heard []Decision
	spec := canary(0)
	spec.Steps = []float64{1, 5, 100}
	s, _ := New([]Spec{spec}, WithRollback(func(d Decision) { heard = append(heard, d) }))
	d, err := s.Promote("resnet50")
	if err != nil || d.From != 1 || d.To != 5 || !d.Manual {
		t.Fatalf("Promote: %+v, %v", d, err)
	}
	if st := s.Status()[0]; st.Weight != 5 || st.Step != 1 {
		t.Errorf("after Promote: weight %g step %d", st.Weight, st.Step)
	}
	d, err = s.Rollback("resnet50", "latency on the dashboard")
	if err != nil || d.To != 0 || d.Reason != "rolled back at 5% by an operator: latency on the dashboard" {
		t.Fatalf("Rollback: %+v, %v", d, err)
	}
	if len(heard) != 1 || !heard[0].Manual {
		t.Errorf("the hook heard %+v", heard)
	}
	if h := s.Status()[0].History; len(h) != 2 || h[0].Kind != Promote || h[1].Kind != Rollback {
		t.Errorf("history %+v", h)
	}
}

// A canary short of evidence at its step's time limit is held, not
// promoted, and says how many calls it still needs.
func TestAStepOutOfTimeIsHeld(t *testing.T) {
	spec := canary(0)
	spec.Steps = []float64{1, 100}
	spec.Judgement.StepTimeLimit = time.Minute
	s := mustClockSet(t, spec)
	now := epoch
	var ds []Decision
	for range 61 {
		feed(s, 2, 1)
		now = now.Add(time.Second)
		ds = append(ds, s.Judge(now)...)
	}
	if len(ds) != 1 || ds[0].Kind != Hold || !strings.HasPrefix(ds[0].Reason, "held at 1%: the step's time limit (1m0s) passed") {
		t.Fatalf("decisions %+v", ds)
	}
	st := s.Status()[0]
	if st.State != Held || st.Weight != 1 || st.Current.Needs < 1 {
		t.Errorf("status %s at %g%%, needs %d", st.State, st.Weight, st.Current.Needs)
	}
	t.Log(st.Current.Reason)
	feed(s, 5000, 0.5) // now promotable, but held for an operator
	if ds := s.Judge(now.Add(10 * time.Second)); len(ds) != 0 {
		t.Errorf("a held release decided %+v", ds)
	}
}

// A reload keeps the state of an unchanged release and starts a changed
// one afresh, saying why.
func TestApplyKeepsUnchangedReleases(t *testing.T) {
	bert := canary(10)
	bert.Model = "bert"
	s := mustClockSet(t, canary(10), bert)
	feed(s, 100, 1)
	s.Judge(epoch.Add(time.Minute))
	bert.Candidate = Target{Model: "bert-large"}
	keep := canary(10)
	keep.Judgement.Alpha = 0.05
	if err := s.Apply([]Spec{keep, bert}); err != nil {
		t.Fatal(err)
	}
	s.Judge(epoch.Add(2 * time.Minute))
	st := s.Status()
	if st[0].Spec.Model != "bert" || !strings.Contains(st[0].Reset, "candidate version 2, now model bert-large") {
		t.Errorf("bert: reset %q", st[0].Reset)
	}
	if st[1].Evidence.Errors.Calls != [2]uint64{100, 100} || st[1].Spec.Judgement.Alpha != 0.05 || st[1].Reset != "" {
		t.Errorf("resnet50 kept %v calls, alpha %g, reset %q", st[1].Evidence.Errors.Calls, st[1].Spec.Judgement.Alpha, st[1].Reset)
	}
}
