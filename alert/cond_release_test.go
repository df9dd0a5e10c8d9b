package alert

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeReleases is a ReleaseSource the tests set by hand.
type fakeReleases struct {
	mu  sync.Mutex
	rel []ReleaseState
}

func (f *fakeReleases) Releases() []ReleaseState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ReleaseState(nil), f.rel...)
}

func (f *fakeReleases) set(rs ...ReleaseState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rel = rs
}

const regressionWords = "version 2's p99 is 1.31x version 1's for inputs of 1-2 rows (95% confidence sequence 1.22-1.40, 4,210 calls); rolled back at 10%"

// The built-in VersionRegression rule notifies, through the ordinary
// pipeline, the moment a release is rolled back, with the rollback's
// evidence in words as its summary; it stays firing while the release
// stays rolled back (whether or not the model has calls) and resolves
// when the release is restarted or removed. No sleeps: the engine's
// clock is the test's.
func TestVersionRegressionAlert(t *testing.T) {
	cfg := &Config{}
	r := newRig(t, cfg)
	src := &r.rel
	src.set(ReleaseState{Model: "resnet50"}, ReleaseState{Model: "bert"})
	r.run(5 * time.Second)
	if msgs, _ := r.sink.take(); len(msgs) != 0 || r.state("VersionRegression", "resnet50") != "" {
		t.Fatalf("a running release alerted: %d notifications", len(msgs))
	}

	at := r.c.now()
	src.set(ReleaseState{Model: "resnet50", RolledBack: true, Reason: regressionWords, At: at}, ReleaseState{Model: "bert"})
	r.run(DefaultGroupWait + 2*time.Second) // the group's first wait
	msgs, _ := r.sink.take()
	if len(msgs) != 1 || len(msgs[0].Alerts) != 1 {
		t.Fatalf("after the rollback: %d notifications, want one with one alert", len(msgs))
	}
	a := msgs[0].Alerts[0]
	if a.Name != "VersionRegression" || a.Status != "firing" || a.Labels["model"] != "resnet50" || a.Labels["kind"] != KindVersionRegression || a.Severity != SeverityCritical {
		t.Errorf("notification: %+v; want VersionRegression firing for resnet50, kind version_regression, critical", a)
	}
	if want := "resnet50: " + regressionWords; a.Annotations["summary"] != want {
		t.Errorf("summary:\n got %q\nwant %q", a.Annotations["summary"], want)
	}
	if !strings.Contains(a.Evidence, "1.31x") {
		t.Errorf("evidence %q lacks the ratio", a.Evidence)
	}

	// Still rolled back ten minutes on, the model without calls: still
	// firing, and the summary still the decision's words.
	r.run(10 * time.Minute)
	if st := r.state("VersionRegression", "resnet50"); st != StateFiring {
		t.Errorf("ten minutes after the rollback: %s, want firing", st)
	}
	if r.state("VersionRegression", "bert") != "" {
		t.Error("bert, never rolled back, alerted")
	}
	r.sink.take()

	// Restarted (a changed release at a reload): resolved at once.
	src.set(ReleaseState{Model: "resnet50"}, ReleaseState{Model: "bert"})
	r.run(time.Minute) // the group's interval
	msgs, _ = r.sink.take()
	if len(msgs) == 0 || msgs[len(msgs)-1].Status != "resolved" {
		t.Fatalf("after the restart: %d notifications, want a resolved one", len(msgs))
	}

	// A second rollback, then the release removed: cmd reports it as not
	// rolled back for a while, so the alert resolves at once too.
	src.set(ReleaseState{Model: "bert", RolledBack: true, Reason: "rolled back at 5% by an operator: p99 doubled", Manual: true, At: r.c.now()})
	r.run(2 * time.Second)
	if st := r.state("VersionRegression", "bert"); st != StateFiring {
		t.Fatalf("bert rolled back by an operator: %s, want firing", st)
	}
	src.set(ReleaseState{Model: "bert"})
	r.run(2 * time.Second)
	if st := r.state("VersionRegression", "bert"); st != StateResolved && st != "" {
		t.Errorf("bert's release removed: %s, want resolved", st)
	}
}

// Without a ReleaseSource the rule has no subjects: no alert, no error.
func TestVersionRegressionWithoutReleases(t *testing.T) {
	r := newRig(t, &Config{})
	r.e.opts.Releases = nil
	r.run(3 * time.Second)
	if msgs, _ := r.sink.take(); len(msgs) != 0 {
		t.Errorf("%d notifications without releases", len(msgs))
	}
}
