package load

import (
	"testing"
	"time"
)

func TestScheduleFixedDoesNotDrift(t *testing.T) {
	start := time.Unix(1000, 0)
	s := newSchedule(start, 3000, Fixed, 1)
	var last time.Time
	for range 3001 {
		last = s.next()
	}
	if want := start.Add(time.Second); !last.Equal(want) {
		t.Errorf("request 3000 intended at %v, want %v", last.Sub(start), want.Sub(start))
	}
}

func TestSchedulePoissonMeanRate(t *testing.T) {
	start := time.Unix(1000, 0)
	s := newSchedule(start, 1000, Poisson, 7)
	if first := s.next(); !first.Equal(start) {
		t.Errorf("first send at %v, want the start", first.Sub(start))
	}
	const n = 20000
	var last time.Time
	for range n {
		last = s.next()
	}
	// Seeded, so deterministic; the mean gap of 20k draws is within 3% of 1 ms.
	mean := last.Sub(start) / n
	if mean < 970*time.Microsecond || mean > 1030*time.Microsecond {
		t.Errorf("mean gap %v, want about 1ms", mean)
	}
}
