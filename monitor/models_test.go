package monitor

import (
	"testing"
	"time"
)

// Models is each model's latency over the last slices, as grouped:
// another model's calls, and calls the group leaves out (failures), do
// not move it; a model without calls in those slices is absent.
func TestModelsView(t *testing.T) {
	r := NewRegistry(Options{NoRequestHistogram: true})
	key := func(model, version, code string) SeriesKey {
		return SeriesKey{Model: model, Version: version, Method: "/m", Upstream: "u", CodeClass: code}
	}
	okOnly := func(k SeriesKey) string {
		if k.CodeClass != CodeClassOK {
			return ""
		}
		return k.Model
	}
	for range 10 {
		r.Record(key("idle", "1", CodeClassOK), Sample{Total: time.Second})
	}
	r.Rotate()
	for i := range 100 {
		d := 10 * time.Millisecond
		if i%50 == 0 {
			d = 200 * time.Millisecond
		}
		// Two versions of one model are one model.
		r.Record(key("b", []string{"1", "2"}[i%2], CodeClassOK), Sample{Total: d})
		r.Record(key("a", "1", CodeClassOK), Sample{Total: time.Millisecond})
		r.Record(key("a", "1", CodeClassServerError), Sample{Total: 5 * time.Second, Code: "Internal"})
	}
	r.Rotate()
	got := r.Models(1, okOnly)
	if len(got) != 2 || got[0].Model != "a" || got[1].Model != "b" {
		t.Fatalf("models %+v, want a and b (idle had no calls in the last slice)", got)
	}
	if a := got[0]; a.Calls != 100 || a.P99 > 2*time.Millisecond {
		t.Errorf("a: %+v, want 100 calls of 1ms (its failures left out)", a)
	}
	if b := got[1]; b.Calls != 100 || b.P50 > 11*time.Millisecond || b.P99 < 190*time.Millisecond {
		t.Errorf("b: %+v, want p50 10ms and p99 200ms over both versions", b)
	}
	if w := got[0].Window; w != time.Second {
		t.Errorf("window %v, want one slice (1s)", w)
	}
}
