package release

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A restart mid-release resumes the same step with its evidence: a Set
// restored from a snapshot decides exactly what the Set that kept
// running decides, at the same moments, in the same words.
func TestRestartResumesTheStepWithItsEvidence(t *testing.T) {
	spec := canary(0)
	spec.Steps = []float64{10, 50, 100}
	spec.Judgement.MinCalls = 100
	w := world{spec: spec, rate: 400, slower: 0.85, errs: [2]float64{0.003, 0.003}}
	run := func(restartAt int) ([]Decision, Status) {
		rng := rand.New(rand.NewPCG(7, 46))
		set := mustClockSet(t, spec)
		var ds []Decision
		for sec := range 240 {
			if sec == restartAt {
				b, err := set.Snapshot(epoch.Add(time.Duration(sec) * time.Second))
				if err != nil {
					t.Fatal(err)
				}
				before := set.Status()
				set = mustClockSet(t, spec)
				if err := set.Restore(b); err != nil {
					t.Fatal(err)
				}
				if after := set.Status(); !reflect.DeepEqual(before, after) {
					t.Fatalf("status after the restore differs:\n%+v\n%+v", before, after)
				}
			}
			w.second(set, rng, sec)
			ds = append(ds, set.Judge(epoch.Add(time.Duration(sec+1)*time.Second))...)
		}
		return ds, set.Status()[0]
	}
	kept, keptStatus := run(-1)
	restarted, restartedStatus := run(45)
	if len(kept) == 0 {
		t.Fatal("no decision in four minutes: the test shows nothing")
	}
	if !reflect.DeepEqual(kept, restarted) {
		t.Errorf("decisions differ after a restart:\n%+v\n%+v", kept, restarted)
	}
	if !reflect.DeepEqual(keptStatus.Evidence, restartedStatus.Evidence) {
		t.Errorf("evidence differs after a restart:\n%+v\n%+v", keptStatus.Evidence, restartedStatus.Evidence)
	}
	t.Logf("%d decisions, last: %s", len(kept), kept[len(kept)-1].Reason)
}

func TestRestoreOfAChangedReleaseStartsAfreshAndSaysWhy(t *testing.T) {
	s := mustSet(t, canary(10))
	r := s.Choose("resnet50", nil, false).Release
	for i := range 500 {
		r.Observe(Version(i%2), 0, time.Millisecond, true)
	}
	s.Judge(epoch)
	b, err := s.Snapshot(epoch)
	if err != nil {
		t.Fatal(err)
	}
	changed := canary(10)
	changed.Candidate = Target{Version: "3"}
	s2 := mustSet(t, changed)
	if err := s2.Restore(b); err != nil {
		t.Fatal(err)
	}
	st := s2.Status()[0]
	if want := "candidate version 2, now version 3"; !strings.Contains(st.Reset, want) {
		t.Errorf("reset %q does not say %q", st.Reset, want)
	}
	if st.Evidence.Errors.Calls != [2]uint64{} {
		t.Errorf("a fresh release kept evidence: %+v", st.Evidence.Errors)
	}
	// The same release restores its calls.
	s3 := mustSet(t, canary(10))
	if err := s3.Restore(b); err != nil {
		t.Fatal(err)
	}
	s3.Judge(epoch.Add(time.Minute))
	if got := s3.Status()[0].Evidence.Errors.Calls; got != [2]uint64{250, 250} {
		t.Errorf("restored calls %v, want 250 each", got)
	}
}

func TestRestoreRefusesAnotherVersionOrGarbage(t *testing.T) {
	s := mustSet(t, canary(10))
	b, _ := json.Marshal(stateFile{Version: StateVersion + 1})
	for _, in := range [][]byte{b, []byte("{"), []byte(`{"version":1,"releases":[{"spec":{"model":"resnet50"},"classes":[{"class":99}]}]}`)} {
		err := s.Restore(in)
		st := s.Status()[0]
		if err == nil && st.Reset == "" {
			t.Errorf("Restore(%.40s) neither failed nor reset", in)
		}
		if st.Weight != 10 || st.State != Running {
			t.Errorf("Restore(%.40s) changed the release: %+v", in, st)
		}
	}
}

func mustClockSet(t testing.TB, specs ...Spec) *Set {
	t.Helper()
	s, err := New(specs, WithClock(func() time.Time { return epoch }))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
