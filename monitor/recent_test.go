package monitor

import (
	"testing"
	"time"
)

func TestRecent(t *testing.T) {
	r := NewRegistry(Options{NoRequestHistogram: true})
	key := func(model, code string) SeriesKey {
		return SeriesKey{Model: model, Version: "1", Method: "/m", Upstream: "u", CodeClass: code}
	}
	byModel := func(k SeriesKey) string {
		if k.CodeClass != CodeClassOK {
			return ""
		}
		return k.Model
	}
	// Slice 1: slow calls; slices 2 and 3: fast calls on two series of
	// the same model (another version) and one failure, which the group
	// function leaves out.
	for range 10 {
		r.Record(key("a", CodeClassOK), Sample{Total: 100 * time.Millisecond})
	}
	r.Rotate()
	for range 10 {
		r.Record(key("a", CodeClassOK), Sample{Total: time.Millisecond})
		k := key("a", CodeClassOK)
		k.Version = "2"
		r.Record(k, Sample{Total: 2 * time.Millisecond, Queue: time.Millisecond})
		r.Record(key("a", CodeClassServerError), Sample{Total: time.Second})
	}
	r.Rotate()
	r.Rotate() // an empty slice

	got, _ := r.Recent(2, byModel)
	a, ok := got["a"]
	if !ok || len(got) != 1 {
		t.Fatalf("Recent = %+v", got)
	}
	tot := a.Stats[ComponentTotal]
	if tot.Count != 20 || tot.Max != 2*time.Millisecond || !a.QueueSeen {
		t.Errorf("last 2 slices: %+v queueSeen=%v; want 20 fast calls", tot, a.QueueSeen)
	}
	got, _ = r.Recent(3, byModel)
	if tot := got["a"].Stats[ComponentTotal]; tot.Count != 30 || tot.Max != 100*time.Millisecond {
		t.Errorf("last 3 slices: %+v; want the slow slice too", tot)
	}
	got, _ = r.Recent(1, byModel)
	if len(got) != 0 {
		t.Errorf("last slice is empty, got %+v", got)
	}
}

func TestRecentCalls(t *testing.T) {
	r, _ := newTestRegistry(t, Options{MaxSeries: 1})
	ok, bad := testKey, testKey
	bad.CodeClass = CodeClassServerError
	for range 3 {
		r.Record(ok, Sample{Total: time.Millisecond, Code: "OK"})
	}
	r.Record(bad, Sample{Total: time.Millisecond, Code: "Unavailable"}) // over the cap: overflow
	r.Rotate()
	r.Record(ok, Sample{Total: time.Millisecond, Code: "OK"})
	r.Rotate()
	if got := r.RecentCalls(1); got[CodeClassOK] != 1 || got[OverflowLabel] != 0 {
		t.Errorf("last slice: %v, want 1 ok", got)
	}
	got := r.RecentCalls(2)
	if got[CodeClassOK] != 4 || got[OverflowLabel] != 1 {
		t.Errorf("last two slices: %v, want 4 ok and 1 in the overflow series", got)
	}
}

func TestRecentSums(t *testing.T) {
	r := NewRegistry(Options{NoRequestHistogram: true})
	byModel := func(k SeriesKey) string {
		if k.CodeClass != CodeClassOK {
			return ""
		}
		return k.Model
	}
	for _, v := range []string{"1", "2"} {
		k := SeriesKey{Model: "a", Version: v, Method: "/m", Upstream: "u", CodeClass: CodeClassOK}
		for range 5 {
			r.Record(k, Sample{Total: 3 * time.Millisecond, Upstream: 2 * time.Millisecond})
		}
	}
	r.Record(SeriesKey{Model: "a", Method: "/m", Upstream: "u", CodeClass: CodeClassServerError}, Sample{Total: time.Second, Upstream: time.Second})
	if got := r.RecentSums(1, byModel); len(got) != 0 {
		t.Errorf("before the slice completes: %+v", got)
	}
	r.Rotate()
	got := r.RecentSums(1, byModel)
	if a := got["a"]; len(got) != 1 || a.Calls != 10 || a.Upstream != 20*time.Millisecond {
		t.Errorf("RecentSums = %+v, want a: 10 calls, 20ms upstream", got)
	}
	r.Rotate()
	if got := r.RecentSums(1, byModel); len(got) != 0 {
		t.Errorf("an empty slice: %+v", got)
	}
}
