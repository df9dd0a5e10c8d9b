package pool

import (
	"testing"
	"time"
)

// The service time is the least answer of the current and the last
// window, with their count; a window older than the last is forgotten,
// and two windows without an answer leave no evidence.
func TestServiceMinWindows(t *testing.T) {
	var s serviceMin
	t0 := time.Unix(1000, 0).UnixNano()
	at := func(d time.Duration) int64 { return t0 + int64(d) }
	if d, n := s.at(t0); d != 0 || n != 0 {
		t.Fatalf("empty: %s over %d", d, n)
	}
	s.observe(at(0), 3*time.Millisecond)
	s.observe(at(100*time.Millisecond), 2*time.Millisecond)
	s.observe(at(200*time.Millisecond), 4*time.Millisecond)
	if d, n := s.at(at(time.Second)); d != 2*time.Millisecond || n != 3 {
		t.Errorf("one window: %s over %d, want 2ms over 3", d, n)
	}
	// The next window: the last one's least still counts.
	s.observe(at(minWindow+300*time.Millisecond), 5*time.Millisecond)
	if d, n := s.at(at(minWindow + time.Second)); d != 2*time.Millisecond || n != 4 {
		t.Errorf("two windows: %s over %d, want 2ms over 4", d, n)
	}
	// Two windows on: the first is gone.
	s.observe(at(2*minWindow+500*time.Millisecond), 6*time.Millisecond)
	if d, n := s.at(at(2*minWindow + time.Second)); d != 5*time.Millisecond || n != 2 {
		t.Errorf("after a rotation: %s over %d, want 5ms over 2", d, n)
	}
	// Silence for more than two windows: no evidence.
	if d, n := s.at(at(5 * minWindow)); d != 0 || n != 0 {
		t.Errorf("stale: %s over %d, want none", d, n)
	}
	// An answer after a long silence starts afresh.
	s.observe(at(10*minWindow), 7*time.Millisecond)
	if d, n := s.at(at(10*minWindow + time.Second)); d != 7*time.Millisecond || n != 1 {
		t.Errorf("afresh: %s over %d, want 7ms over 1", d, n)
	}
	s.forget()
	if d, n := s.at(at(10*minWindow + time.Second)); d != 0 || n != 0 {
		t.Errorf("forgotten: %s over %d, want none", d, n)
	}
}
