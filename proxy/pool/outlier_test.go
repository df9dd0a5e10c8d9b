package pool

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// simCall is a call in flight in runPool.
type simCall struct {
	end   time.Time
	e     *Endpoint
	took  time.Duration
	model string
}

type simCalls []simCall

func (h simCalls) Len() int           { return len(h) }
func (h simCalls) Less(i, j int) bool { return h[i].end.Before(h[j].end) }
func (h simCalls) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *simCalls) Push(x any)        { *h = append(*h, x.(simCall)) }
func (h *simCalls) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// runPool runs callers closed-loop callers of model through u on a
// simulated clock from start until end: each call is acquired, takes
// latency(e, now) on the endpoint it went to, is released, and the
// caller calls again. every, if not nil, runs before each call starts
// (to add an endpoint, slow one down). It returns the calls each endpoint
// took by address, counted from countFrom on.
func runPool(u *Pool, model string, callers int, start, countFrom, end time.Time,
	latency func(e *Endpoint, now time.Time) time.Duration, every func(now time.Time)) map[string]int {
	count := map[string]int{}
	var h simCalls
	send := func(now time.Time) {
		if every != nil {
			every(now)
		}
		e := u.acquire(now, model)
		if !now.Before(countFrom) {
			count[e.addr]++
		}
		d := latency(e, now)
		heap.Push(&h, simCall{end: now.Add(d), e: e, took: d, model: model})
	}
	for range callers {
		send(start)
	}
	for h.Len() > 0 {
		c := heap.Pop(&h).(simCall)
		u.release(c.e, c.model, c.end, c.took, Answered)
		if now := c.end.Add(20 * time.Microsecond); now.Before(end) {
			send(now)
		}
	}
	return count
}

// subMillisecond is the latency of a replica of a model that answers in
// a few hundred microseconds on a busy machine: one answer in a hundred
// is a pause of 2 to 20 ms, a replica's first seconds are 2.5 times
// slower (cold), and one that had no call for 50 ms answers its next one
// a millisecond later (its process is woken up): a replica kept without
// calls looks slower than it is.
func subMillisecond(r *rand.Rand, warm func(e *Endpoint, now time.Time) bool) func(e *Endpoint, now time.Time) time.Duration {
	last := map[*Endpoint]time.Time{}
	return func(e *Endpoint, now time.Time) time.Duration {
		d := 400*time.Microsecond + time.Duration(r.ExpFloat64()*float64(100*time.Microsecond))
		if !warm(e, now) {
			d = d * 5 / 2
		}
		if l, ok := last[e]; ok && now.Sub(l) > 50*time.Millisecond {
			d += time.Millisecond
		}
		last[e] = now
		if r.IntN(100) == 0 {
			d += 2*time.Millisecond + time.Duration(r.IntN(18000))*time.Microsecond
		}
		return d
	}
}

// A pool of a sub-millisecond model, a fourth replica added (cold, in
// its slow start): no replica is ejected, and each of the four takes at
// least 10% of the calls from its addition on. Before, the one added
// was ejected as "slow: answers in 1.2ms at best, 2.4x the pool's
// median 500µs" (its least latency over its few calls against the
// others' over thousands) and a pause's peak kept calls off it.
func TestFastPoolKeepsEveryReplica(t *testing.T) {
	u := testPool(4, BalanceLatency)
	u.slowStart = DefaultEndpointSlowStart
	all := u.Endpoints()
	u.eps.Store(&endpoints{list: all[:3]})
	start := time.Unix(1000, 0)
	added := start.Add(2 * time.Second)
	r := rand.New(rand.NewPCG(7, 8))
	lat := subMillisecond(r, func(e *Endpoint, now time.Time) bool {
		return e != all[3] || now.Sub(added) > 2*time.Second
	})
	count := runPool(u, "simple", 8, start, added, added.Add(7*time.Second), lat, func(now time.Time) {
		if len(u.Endpoints()) == 3 && !now.Before(added) {
			all[3].since.Store(now.UnixNano())
			u.eps.Store(&endpoints{list: all})
		}
	})
	total := 0
	for _, n := range count {
		total += n
	}
	for _, e := range all {
		share := float64(count[e.addr]) / float64(total)
		if share < 0.10 {
			t.Errorf("replica %s took %.1f%% of the calls, want at least 10%% (calls %v)", e.addr, 100*share, count)
		}
		if e.ejections.Load() > 0 {
			t.Errorf("replica %s ejected: %s", e.addr, *e.why.Load())
		}
	}
	t.Logf("calls per replica from the fourth's addition: %v", count)
}

// A replica of a 5 ms model slowed to 20 ms is ejected within seconds,
// under a pool's load and with the picker keeping most calls off it; the
// others are not.
func TestSlowReplicaEjectedWithinSeconds(t *testing.T) {
	u := testPool(4, BalanceLatency)
	slow := u.Endpoints()[1]
	start := time.Unix(1000, 0)
	from := start.Add(3 * time.Second)
	r := rand.New(rand.NewPCG(9, 10))
	var ejectedAt time.Time
	runPool(u, "resnet50", 16, start, start, start.Add(10*time.Second), func(e *Endpoint, now time.Time) time.Duration {
		d := 5*time.Millisecond + time.Duration(r.ExpFloat64()*float64(500*time.Microsecond))
		if e == slow && now.After(from) {
			d *= 4
		}
		return d
	}, func(now time.Time) {
		if ejectedAt.IsZero() && !slow.usable(now.UnixNano()) {
			ejectedAt = now
		}
	})
	if ejectedAt.IsZero() {
		t.Fatal("a replica 4x slower was not ejected in 7 s")
	}
	t.Logf("ejected %s after it slowed down: %s", ejectedAt.Sub(from), *slow.why.Load())
	if d := ejectedAt.Sub(from); d > 5*time.Second {
		t.Errorf("ejected %s after it slowed down, want within 5 s (its least latency is of the last 2 to 4 s)", d)
	}
	for _, e := range u.Endpoints() {
		if e != slow && e.ejections.Load() > 0 {
			t.Errorf("%s ejected too: %s", e.addr, *e.why.Load())
		}
	}
}

// feedRounds releases one answer of model on each endpoint of u per
// round, 10 ms apart, for rounds rounds from start, each taking
// latency(i, round); it returns the time after the last.
func feedRounds(u *Pool, model string, start time.Time, rounds int, latency func(i, round int) time.Duration) time.Time {
	now := start
	for k := range rounds {
		for i, e := range u.Endpoints() {
			if d := latency(i, k); d > 0 && e.usable(now.UnixNano()) {
				u.begin(e, "")
				u.release(e, model, now, d, Answered)
			}
		}
		now = now.Add(10 * time.Millisecond)
	}
	return now
}

// A replica three times slower than the rest of a sub-millisecond pool,
// over thousands of answers, is not ejected: 200µs against 600µs is
// nothing a caller notices. Past the margin, it is.
func TestLatencyEjectionNeedsMargin(t *testing.T) {
	for _, tc := range []struct {
		fast, slow time.Duration
		eject      bool
	}{
		{200 * time.Microsecond, 600 * time.Microsecond, false},
		{time.Millisecond, 2500 * time.Microsecond, true},
	} {
		for _, model := range []string{"simple", ""} {
			u := testPool(4, BalanceLatency)
			feedRounds(u, model, time.Unix(1000, 0), 150, func(i, _ int) time.Duration {
				if i == 2 {
					return tc.slow
				}
				return tc.fast
			})
			for i, e := range u.Endpoints() {
				if got := e.ejections.Load() > 0; got != (tc.eject && i == 2) {
					why := ""
					if w := e.why.Load(); w != nil {
						why = *w
					}
					t.Errorf("%s against %s (model %q): endpoint %d ejected %v %q", tc.slow, tc.fast, model, i, got, why)
				}
			}
		}
	}
}

// A least latency is evidence only over enough answers: 5 answers slower
// than the others' least do not eject a replica, and neither do 12 whose
// least is within the others' spread (the least of 12 of the others'
// answers would be as slow: they queue, and their own least is over
// hundreds).
func TestLatencyEjectionNeedsEvidence(t *testing.T) {
	u := testPool(4, BalanceLatency)
	start := time.Unix(1000, 0)
	feedRounds(u, "m", start, 5, func(i, _ int) time.Duration {
		if i == 0 {
			return 8 * time.Millisecond
		}
		return 2 * time.Millisecond
	})
	if e := u.Endpoints()[0]; e.ejections.Load() > 0 {
		t.Errorf("ejected on 5 answers: %s", *e.why.Load())
	}

	u = testPool(4, BalanceLatency)
	r := rand.New(rand.NewPCG(5, 6))
	feedRounds(u, "m", start, 100, func(i, k int) time.Duration {
		if i == 0 && k%8 != 0 {
			return 0 // few calls: the picker passes it over
		}
		// Queueing: 1 to 20 ms, most of it waiting.
		d := time.Millisecond + time.Duration(r.IntN(19000))*time.Microsecond
		if i == 0 {
			d = max(d, 4*time.Millisecond) // its least of 12 at 4 ms
		}
		return d
	})
	if e := u.Endpoints()[0]; e.ejections.Load() > 0 {
		t.Errorf("ejected on its least of 12 answers inside the others' spread: %s", *e.why.Load())
	}
}

// A replica warming up (added, back from an ejection) is not judged on
// its first answers; once its slow start is over, a slow one is.
func TestLatencyEjectionSparesWarmingUp(t *testing.T) {
	u := testPool(4, BalanceLatency)
	u.slowStart = DefaultEndpointSlowStart
	start := time.Unix(1000, 0)
	cold := u.Endpoints()[3]
	cold.since.Store(start.UnixNano())
	lat := func(i, _ int) time.Duration {
		if i == 3 {
			return 20 * time.Millisecond
		}
		return 5 * time.Millisecond
	}
	now := feedRounds(u, "m", start, 400, lat) // 4 s
	if cold.ejections.Load() > 0 {
		t.Fatalf("ejected in its slow start: %s", *cold.why.Load())
	}
	feedRounds(u, "m", now, 200, lat)
	if cold.ejections.Load() == 0 {
		t.Fatal("4x slower after its slow start and not ejected")
	}
}

// A replica is judged per model: one that serves only a heavy model is
// not slow against replicas whose least latency is a light model's.
func TestLatencyJudgedPerModel(t *testing.T) {
	u := testPool(4, BalanceLatency)
	now := time.Unix(1000, 0)
	for range 200 {
		for i, e := range u.Endpoints() {
			u.begin(e, "")
			u.release(e, "big", now, 10*time.Millisecond, Answered)
			if i != 0 {
				u.begin(e, "")
				u.release(e, "small", now, 300*time.Microsecond, Answered)
			}
		}
		now = now.Add(10 * time.Millisecond)
	}
	for _, e := range u.Endpoints() {
		if e.ejections.Load() > 0 {
			t.Errorf("%s ejected: %s", e.addr, *e.why.Load())
		}
	}
}

// One slow answer (a pause) raises a replica's cost at most peakStep
// times, and a replica never measured starts at the pool's cheapest: a
// 20 ms answer of a 300µs replica does not keep calls off it for the
// seconds its cost would take to decay.
func TestOneSlowAnswerIsAPeakNotACost(t *testing.T) {
	u := testPool(4, BalanceLatency)
	now := time.Unix(1000, 0)
	list := u.Endpoints()
	for _, e := range list[:3] {
		u.begin(e, "")
		u.release(e, "", now, 300*time.Microsecond, Answered)
	}
	u.begin(list[3], "")
	u.release(list[3], "", now, 20*time.Millisecond, Answered) // its first answer
	if c, want := list[3].costAt(now.UnixNano()), peakStep*float64(300*time.Microsecond); c > want {
		t.Errorf("cost after one 20 ms answer %s, want at most %s", time.Duration(c), time.Duration(want))
	}
	u.begin(list[0], "")
	u.release(list[0], "", now, 20*time.Millisecond, Answered)
	if c, want := list[0].costAt(now.UnixNano()), peakStep*float64(300*time.Microsecond); c > want {
		t.Errorf("cost after one 20 ms answer %s, want at most %s", time.Duration(c), time.Duration(want))
	}
	// With one call in flight on each of the others, it takes the next.
	for _, e := range list[1:3] {
		e.inFlight.Add(1)
	}
	list[3].inFlight.Add(1)
	if e := u.pick(now.UnixNano(), ""); e != list[0] {
		t.Errorf("picked %s, want the replica with the pause (a): its latency is within the floor", e.addr)
	}
}

// A pause on one replica of a sub-millisecond pool (one answer in 20
// ms) does not keep calls off it: it takes at least 10% of the calls in
// each second after. Before, its cost was the pause's 20 ms, against
// the others' 200µs, for the tens of seconds it took to decay: it took
// no call at all.
func TestPauseDoesNotStarveAReplica(t *testing.T) {
	u := testPool(4, BalanceLatency)
	a := u.Endpoints()[0]
	start := time.Unix(1000, 0)
	r := rand.New(rand.NewPCG(11, 12))
	paused := false
	lat := func(e *Endpoint, now time.Time) time.Duration {
		d := 150*time.Microsecond + time.Duration(r.ExpFloat64()*float64(50*time.Microsecond))
		if e == a && !paused && now.Sub(start) > time.Second {
			paused = true
			d = 20 * time.Millisecond
		}
		return d
	}
	for sec := range 4 {
		from := start.Add(time.Duration(sec) * time.Second)
		count := runPool(u, "simple", 16, from, from, from.Add(time.Second), lat, nil)
		total := 0
		for _, n := range count {
			total += n
		}
		if share := float64(count[a.addr]) / float64(total); share < 0.10 {
			t.Errorf("second %d: the replica with the pause took %.1f%% of the calls, want at least 10%% (calls %v)", sec, 100*share, count)
		}
	}
}

// BenchmarkPoolCall is one call's pick and release in a pool of four,
// its latency judged for ejection: 5 ms (over the margin, the others'
// service times read) and 200µs (under it).
func BenchmarkPoolCall(b *testing.B) {
	for _, d := range []time.Duration{5 * time.Millisecond, 200 * time.Microsecond} {
		b.Run(d.String(), func(b *testing.B) {
			u := testPool(4, BalanceLatency)
			now := time.Unix(1000, 0)
			b.ReportAllocs()
			for range b.N {
				e := u.acquire(now, "resnet50")
				u.release(e, "resnet50", now.Add(d), d, Answered)
				now = now.Add(50 * time.Microsecond)
			}
		})
	}
}

// A replica of a 5 ms model answering a hundred calls a second forgets a
// slow answer (a pause, a call that waited behind another) within a
// few dozen answers: its cost is back near its latency in under a
// second, not ten seconds later. Its costs near the slowest of its last
// thousand answers made a healthy pool's costs wander two or three
// times apart and the picker queue calls behind busy replicas.
func TestSlowAnswerForgottenByAFastReplica(t *testing.T) {
	u := testPool(4, BalanceLatency)
	e := u.Endpoints()[0]
	now := time.Unix(1000, 0)
	answer := func(d time.Duration) {
		u.begin(e, "")
		u.release(e, "", now, d, Answered)
		now = now.Add(10 * time.Millisecond)
	}
	for range 100 {
		answer(5 * time.Millisecond)
	}
	answer(10 * time.Millisecond)
	answer(20 * time.Millisecond)
	if c := e.costAt(now.UnixNano()); c < float64(15*time.Millisecond) {
		t.Fatalf("cost after two slow answers %s, want them taken as peaks", time.Duration(c))
	}
	for range 60 { // 0.6 s
		answer(5 * time.Millisecond)
	}
	if c, want := e.costAt(now.UnixNano()), 1.25*float64(5*time.Millisecond); c > want {
		t.Errorf("cost 60 answers after a peak %s, want at most %s", time.Duration(c), time.Duration(want))
	}
	// A replica that became slow keeps its cost: every answer is a peak.
	for range 20 {
		answer(20 * time.Millisecond)
	}
	if c := e.costAt(now.UnixNano()); c < float64(19*time.Millisecond) {
		t.Errorf("cost of a replica answering in 20 ms %s", time.Duration(c))
	}
}
