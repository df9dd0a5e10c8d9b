package flow

import (
	"math/rand/v2"
	"testing"
	"time"
)

// serve runs a saturated k-slot replica whose calls take s each for d:
// as many calls in flight as the limit allows, each answered after its
// turn (the mean of a FIFO queue of that many on k slots), and returns
// the limit at the end.
func serve(l *Limiter, now *time.Time, d time.Duration, k int, s func() time.Duration) int {
	end := now.Add(d)
	for now.Before(end) {
		n := l.Limit()
		rtt := s() * time.Duration(max(n, k)) / time.Duration(k)
		*now = now.Add(rtt)
		for range n {
			l.Observe(*now, rtt, n)
		}
	}
	return l.Limit()
}

// A saturated replica's limit settles one above its slots: its slots
// busy, one call waiting there, the rest waiting here.
func TestLimitSettlesAtTheSlots(t *testing.T) {
	for _, k := range []int{1, 4, 16} {
		now := time.Unix(1000, 0)
		l := NewLimiter(now)
		got := serve(l, &now, 2*time.Minute, k, func() time.Duration { return 5 * time.Millisecond })
		if got < k || got > k+1 {
			t.Errorf("%d slots: limit %d, want %d or %d", k, got, k, k+1)
		}
		if nl := l.NoLoad(); nl != 5*time.Millisecond {
			t.Errorf("%d slots: no-load latency %s, want 5ms", k, nl)
		}
	}
}

// A replica that becomes 4x slower keeps its limit (its slots did not
// change) once the probe learnt its new no-load latency, and its limit
// does not creep up meanwhile.
func TestLimitFollowsASlowdown(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLimiter(now)
	s := 5 * time.Millisecond
	serve(l, &now, time.Minute, 4, func() time.Duration { return s })
	s = 20 * time.Millisecond
	for range 6 {
		if got := serve(l, &now, 20*time.Second, 4, func() time.Duration { return s }); got > 5 {
			t.Fatalf("limit crept to %d after the slowdown", got)
		}
	}
	if got := l.Limit(); got < 4 {
		t.Errorf("limit %d two minutes after the slowdown, want 4 or 5", got)
	}
	if nl := l.NoLoad(); nl != s {
		t.Errorf("no-load latency %s, want the new %s", nl, s)
	}
}

// With latency that varies from call to call (±30%), a one-slot
// model's limit stays at one or two: never two calls queued at the
// replica ahead of a critical one.
func TestLimitSteadyUnderNoise(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLimiter(now)
	r := rand.New(rand.NewPCG(5, 6))
	noisy := func() time.Duration { return time.Duration(float64(5*time.Millisecond) * (0.7 + 0.6*r.Float64())) }
	serve(l, &now, 10*time.Second, 1, noisy)
	most := 0
	end := now.Add(2 * time.Minute)
	for now.Before(end) {
		most = max(most, serve(l, &now, 100*time.Millisecond, 1, noisy))
	}
	if most > 2 {
		t.Errorf("limit reached %d on a one-slot model", most)
	}
}

// A one-slot model whose gate keeps a slot for critical calls: the
// standard calls fill the limit less one, a critical call sometimes
// takes the last. Its answers mostly come alone, so latency says there
// is room; but a limit reached now and then is no evidence for more: it
// stays at two, or a critical call would wait behind one more standard
// call queued at the replica.
func TestLimitNotGrownByAReservedSlot(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLimiter(now)
	serve(l, &now, 10*time.Second, 1, func() time.Duration { return 5 * time.Millisecond })
	r := rand.New(rand.NewPCG(7, 8))
	most := 0
	end := now.Add(2 * time.Minute)
	for now.Before(end) {
		limit := l.Limit()
		n := max(limit-1, 1) // the standard calls
		if limit >= 2 && r.Float64() < 0.2 {
			n = limit // a critical call in the kept slot
		}
		rtt := 5 * time.Millisecond * time.Duration(n)
		now = now.Add(rtt)
		for range n {
			l.Observe(now, rtt, n)
		}
		most = max(most, l.Limit())
	}
	if most > 2 {
		t.Errorf("limit reached %d on a one-slot model whose standard calls fill one", most)
	}
}
