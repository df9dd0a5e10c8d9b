package batcher

import (
	"errors"
	"fmt"
	"testing"

	"github.com/infergate/infergate/proto/methods"
)

// Apply changes a model's knobs live: the next calls follow the new
// policy, the queue that replaces the old one keeps its latency fit and
// counters (the adaptive controller does not start over), a bad policy
// is refused with the field named and nothing changes, and a model no
// longer listed has its calls sent alone.
func TestApplyChangesKnobsAndKeepsTheFit(t *testing.T) {
	h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 32})
	for i := range 20 {
		if _, err := h.do(t.Context(), fmt.Sprintf("a 1 r%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	before := h.stats()
	if before.Batches == 0 {
		t.Fatal("no batch counted before Apply")
	}

	changed, err := h.b.Apply(Config{Models: map[string]Policy{"m": {Mode: Adaptive, MaxSize: 8}}})
	if err != nil || fmt.Sprint(changed) != "[m]" {
		t.Fatalf("Apply: changed %v, err %v; want [m]", changed, err)
	}
	if p := h.b.Policies()["m"]; p.MaxSize != 8 {
		t.Errorf("max_size after Apply %d, want 8", p.MaxSize)
	}
	after := h.stats()
	if after.Batches != before.Batches || after.LatencyASeconds != before.LatencyASeconds || after.LatencyBSeconds != before.LatencyBSeconds {
		t.Errorf("the new queue did not carry the old one's fit and counters: before %+v, after %+v", before, after)
	}
	if _, err := h.do(t.Context(), "a 1 next", nil); err != nil {
		t.Fatalf("a call after Apply: %v", err)
	}
	if st := h.stats(); st.Batches != before.Batches+1 {
		t.Errorf("batches after one more call %d, want %d", st.Batches, before.Batches+1)
	}

	// The same configuration again changes nothing.
	if changed, _ := h.b.Apply(Config{Models: map[string]Policy{"m": {Mode: Adaptive, MaxSize: 8}}}); len(changed) != 0 {
		t.Errorf("re-applying the same policy changed %v", changed)
	}

	if _, err := h.b.Apply(Config{Models: map[string]Policy{"m": {Mode: Adaptive, MaxSize: -1}}}); err == nil {
		t.Error("Apply of max_size -1: no error")
	} else if p := h.b.Policies()["m"]; p.MaxSize != 8 {
		t.Errorf("a refused Apply changed max_size to %d", p.MaxSize)
	}

	if c := h.b.Capacity("up", "m"); c < 2 {
		t.Errorf("capacity of a batched model %d, want at least (1 slot + 1) batches of 1", c)
	}
	if _, err := h.b.Apply(Config{Models: map[string]Policy{}}); err != nil {
		t.Fatal(err)
	}
	if h.b.Handles(methods.ModelInfer, "m") {
		t.Error("m still batched after Apply removed it")
	}
	if c := h.b.Capacity("up", "m"); c != 0 {
		t.Errorf("capacity of a model no longer batched %d, want 0 (flow control counts its endpoints' limits)", c)
	}
	if _, err := h.do(t.Context(), "a 1 gone", nil); !errors.Is(err, ErrNotBatched) {
		t.Errorf("a call of a model no longer batched: %v, want ErrNotBatched (sent alone)", err)
	}
}
