package pool

import (
	"sync/atomic"
	"time"
)

// minWindow is the length of each window of the service-time minimum.
const minWindow = 2 * time.Second

// serviceMin is a replica's service time for one model (or for its calls
// that name none): the least latency of its answers in the current and
// the last window of minWindow, as BBR keeps a minimum RTT, and how many
// answers that least one is of. Queueing and a long tail only add to a
// call's latency, so the least of a few seconds' answers is what the
// replica itself takes; the count says how far to trust it (the least of
// a few answers lies higher than the least of thousands of the same).
type serviceMin struct {
	cur, prev   atomic.Int64 // nanoseconds; 0 none
	nCur, nPrev atomic.Int32 // answers
	since       atomic.Int64 // the current window's start, unix nanoseconds
}

// observe folds one answer that took d, at t (unix nanoseconds).
func (s *serviceMin) observe(t int64, took time.Duration) {
	d := int64(max(took, 1))
	if since := s.since.Load(); t-since > int64(minWindow) {
		if s.since.CompareAndSwap(since, t) {
			prev, n := s.cur.Swap(d), s.nCur.Swap(1)
			if t-since > 2*int64(minWindow) {
				prev, n = 0, 0 // the current window is not the last one: stale
			}
			s.prev.Store(prev)
			s.nPrev.Store(n)
			return
		}
	}
	s.nCur.Add(1)
	for {
		cur := s.cur.Load()
		if cur != 0 && cur <= d {
			return
		}
		if s.cur.CompareAndSwap(cur, d) {
			return
		}
	}
}

// at is the least latency of the answers in the last two windows at t
// and their number; 0, 0 when there are none.
func (s *serviceMin) at(t int64) (time.Duration, int) {
	if t-s.since.Load() > 2*int64(minWindow) {
		return 0, 0 // no answer for two windows: no evidence
	}
	cur, prev := s.cur.Load(), s.prev.Load()
	n := int(s.nCur.Load() + s.nPrev.Load())
	switch {
	case cur == 0:
		return time.Duration(prev), n
	case prev == 0:
		return time.Duration(cur), n
	}
	return time.Duration(min(cur, prev)), n
}

// forget drops what s holds: its windows read as stale.
func (s *serviceMin) forget() { s.since.Store(0) }
