package load

import (
	"math/rand/v2"
	"time"
)

// schedule yields the intended send times of an open-loop run. Times are
// computed from the start as offsets so fixed-rate runs do not drift.
type schedule struct {
	start    time.Time
	interval float64 // mean gap in nanoseconds
	poisson  bool
	rng      *rand.Rand
	k        int64   // fixed: index of the next send
	offset   float64 // poisson: offset of the next send in nanoseconds
}

func newSchedule(start time.Time, rate float64, a Arrival, seed uint64) *schedule {
	return &schedule{
		start:    start,
		interval: float64(time.Second) / rate,
		poisson:  a == Poisson,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// next returns the next intended send time; the first is the start.
func (s *schedule) next() time.Time {
	if !s.poisson {
		t := s.start.Add(time.Duration(float64(s.k) * s.interval))
		s.k++
		return t
	}
	t := s.start.Add(time.Duration(s.offset))
	s.offset += s.rng.ExpFloat64() * s.interval
	return t
}
