package pool

import (
	"testing"
	"time"
)

// The peak EWMA on its own: an answer slower than the cost is a peak (at
// most peakStep times the cost), faster ones pull it down at least
// minPull of the way, time alone decays it toward zero, and a lower bound
// (a call never answered) raises it only when above it.
func TestCallLoadPeakEWMA(t *testing.T) {
	var l callLoad
	t0 := time.Unix(1000, 0)
	if c := l.costAt(t0.UnixNano()); c != 0 {
		t.Fatalf("never measured: cost %v, want 0", c)
	}
	l.observe(t0, 5*time.Millisecond)
	if c := time.Duration(l.costAt(t0.UnixNano())); c != 5*time.Millisecond {
		t.Fatalf("first answer: cost %s, want 5ms", c)
	}
	l.observe(t0, 50*time.Millisecond)
	if c := time.Duration(l.costAt(t0.UnixNano())); c != 10*time.Millisecond {
		t.Errorf("a 10x slower answer: cost %s, want a peak of 2x (10ms)", c)
	}
	now := t0
	for range 20 {
		now = now.Add(time.Millisecond) // far under costDecay: minPull decides
		l.observe(now, 5*time.Millisecond)
	}
	if c := time.Duration(l.costAt(now.UnixNano())); c > 7*time.Millisecond {
		t.Errorf("20 answers of 5ms after a peak of 10ms: cost %s, want under 7ms", c)
	}
	before := l.costAt(now.UnixNano())
	if later := l.costAt(now.Add(costDecay).UnixNano()); later > before*0.37 || later < before*0.36 {
		t.Errorf("after costDecay without answers: %v of %v, want e^-1 of it", later, before)
	}
	l.observeAtLeast(now, time.Millisecond)
	if c := l.costAt(now.UnixNano()); c != before {
		t.Errorf("a lower bound under the cost changed it: %v, want %v", c, before)
	}
	l.observeAtLeast(now, time.Second)
	if c := time.Duration(l.costAt(now.UnixNano())); c != time.Second {
		t.Errorf("a call unanswered for 1s: cost %s, want 1s", c)
	}
}
