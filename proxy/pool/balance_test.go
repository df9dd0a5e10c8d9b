package pool

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// testPool is an upstream of n endpoints, all up, with no connections.
func testPool(n int, b Balance) *Pool {
	u := &Pool{balance: b}
	list := make([]*Endpoint, n)
	for i := range list {
		list[i] = &Endpoint{addr: string(rune('a' + i))}
		list[i].up.Store(true)
	}
	u.eps.Store(&endpoints{list: list})
	return u
}

// share runs calls through u one at a time, every gap, each taking
// latency(e) on the endpoint it went to, and returns each endpoint's
// share of them.
func share(u *Pool, calls int, gap time.Duration, start time.Time, latency func(i int) time.Duration) []float64 {
	list := u.Endpoints()
	count := make([]int, len(list))
	now := start
	for range calls {
		e := u.acquire(now, "")
		i := 0
		for i = range list {
			if list[i] == e {
				break
			}
		}
		count[i]++
		d := latency(i)
		u.release(e, "", now.Add(d), d, Answered)
		now = now.Add(gap)
	}
	out := make([]float64, len(list))
	for i, c := range count {
		out[i] = float64(c) / float64(calls)
	}
	return out
}

// With one of four replicas four times slower, the latency picker sends
// it few calls (it is tried again now and then as its cost decays);
// with all equal, it spreads them evenly.
func TestLatencyPickerAvoidsTheSlowReplica(t *testing.T) {
	start := time.Unix(1000, 0)
	u := testPool(4, BalanceLatency)
	got := share(u, 6000, 2500*time.Microsecond, start, func(i int) time.Duration {
		if i == 1 {
			return 22 * time.Millisecond
		}
		return 5500 * time.Microsecond
	})
	if got[1] > 0.05 {
		t.Errorf("the slow replica took %.1f%% of the calls, want at most 5%% (shares %.3f)", 100*got[1], got)
	}
	u = testPool(4, BalanceLatency)
	got = share(u, 8000, 2500*time.Microsecond, start, func(int) time.Duration { return 5 * time.Millisecond })
	for i, s := range got {
		if s < 0.15 || s > 0.35 {
			t.Errorf("equal replicas: endpoint %d took %.1f%% of the calls (shares %.3f)", i, 100*s, got)
		}
	}
}

// A replica that hangs (takes calls, never answers) is avoided: each call
// it held until the client's deadline says its latency was at least that
// long. Before, such calls said nothing, its cost decayed for every
// second without answers as if they had been instant, and the picker
// sent it a growing share of the calls (a quarter of them 40 s into a
// run with real processes, every one failing at its deadline).
func TestLatencyPickerAvoidsAReplicaThatHangs(t *testing.T) {
	const deadline = 3 * time.Second
	u := testPool(3, BalanceLatency)
	list := u.Endpoints()
	now := time.Unix(1000, 0)
	type pending struct {
		e   *Endpoint
		end time.Time
	}
	var hung []pending
	sent := 0
	for i := range 4500 { // 100 calls a second: 5 s healthy, then 40 s
		for len(hung) > 0 && !hung[0].end.After(now) {
			u.release(hung[0].e, "", hung[0].end, deadline, NoVerdict)
			hung = hung[1:]
		}
		e := u.acquire(now, "")
		if e == list[1] && i >= 500 {
			hung = append(hung, pending{e, now.Add(deadline)})
			if i >= 1500 {
				sent++
			}
		} else {
			u.release(e, "", now.Add(6*time.Millisecond), 6*time.Millisecond, Answered)
		}
		now = now.Add(10 * time.Millisecond)
	}
	if share := float64(sent) / 3000; share > 0.01 {
		t.Errorf("the hung replica took %.1f%% of the calls after the first 10 s (%d), want at most 1%%", 100*share, sent)
	}
}

// Calls in flight count: a replica holding many calls is passed over
// even at the same latency.
func TestPickersWeighCallsInFlight(t *testing.T) {
	for _, b := range []Balance{BalanceLatency, BalanceLeastRequest} {
		u := testPool(2, b)
		now := time.Unix(1000, 0)
		for _, e := range u.Endpoints() {
			u.release(e, "", now, 5*time.Millisecond, Answered)
		}
		u.Endpoints()[0].inFlight.Store(50)
		for range 100 {
			if e := u.pick(now.UnixNano(), ""); e != u.Endpoints()[1] {
				t.Fatalf("%s: picked the endpoint with 50 calls in flight over an idle one", b)
			}
		}
	}
}

// Round robin takes each usable endpoint in turn and skips the rest.
func TestRoundRobinSkipsUnusable(t *testing.T) {
	u := testPool(3, BalanceRoundRobin)
	u.Endpoints()[1].up.Store(false)
	now := time.Unix(1000, 0).UnixNano()
	var got []string
	for range 4 {
		got = append(got, u.pick(now, "").addr)
	}
	if got[0] == got[1] || got[0] != got[2] || got[1] != got[3] || got[0] == "b" || got[1] == "b" {
		t.Errorf("picks %q, want a and c in turn", got)
	}
}

// An endpoint is ejected after five server errors in a row, or at once
// when unreachable; the picker passes it over; at most half the pool is
// out; each ejection lasts longer than the last; it comes back after.
func TestOutlierEjection(t *testing.T) {
	u := testPool(4, BalanceLatency)
	list := u.Endpoints()
	now := time.Unix(1000, 0)
	a, b, c := list[0], list[1], list[2]
	for i := range ejectAfterFailures {
		if a.ejectedUntil.Load() != 0 {
			t.Fatalf("ejected after %d failures", i)
		}
		u.release(a, "", now, time.Millisecond, Failed)
	}
	if !(a.ejectedUntil.Load() > now.UnixNano()) || a.usable(now.UnixNano()) {
		t.Fatalf("not ejected after %d server errors in a row", ejectAfterFailures)
	}
	for range 200 {
		if u.pick(now.UnixNano(), "") == a {
			t.Fatal("picked an ejected endpoint while others are usable")
		}
	}
	u.release(b, "", now, time.Millisecond, Unreachable)
	if b.usable(now.UnixNano()) {
		t.Fatal("an unreachable endpoint was not ejected at once")
	}
	u.release(c, "", now, time.Millisecond, Unreachable)
	if !c.usable(now.UnixNano()) {
		t.Fatal("a third of four ejected: more than half the pool out")
	}
	// Back after its time; the next ejection lasts twice as long.
	later := now.Add(ejectBase + time.Second)
	if !a.usable(later.UnixNano()) {
		t.Fatal("still ejected after its ejection time")
	}
	for range ejectAfterFailures {
		u.release(a, "", later, time.Millisecond, Failed)
	}
	if got := time.Duration(a.ejectedUntil.Load() - later.UnixNano()); got != 2*ejectBase {
		t.Errorf("second ejection lasts %s, want %s", got, 2*ejectBase)
	}
	// A success clears the count of failures in a row.
	d := list[3]
	for range ejectAfterFailures - 1 {
		u.release(d, "", later, time.Millisecond, Failed)
	}
	u.release(d, "", later, time.Millisecond, Answered)
	u.release(d, "", later, time.Millisecond, Failed)
	if !d.usable(later.UnixNano()) {
		t.Error("ejected although a success broke its run of failures")
	}
}

func TestFailureOf(t *testing.T) {
	for _, tc := range []struct {
		code         codes.Code
		fromUpstream bool
		ctxDone      bool
		want         Verdict
	}{
		{codes.OK, true, false, Answered},
		{codes.Unavailable, false, false, Unreachable},
		{codes.Unavailable, true, false, Failed},
		{codes.Internal, true, false, Failed},
		{codes.Unavailable, false, true, NoVerdict},       // the client left
		{codes.InvalidArgument, true, false, NoVerdict},   // the client's error
		{codes.DeadlineExceeded, false, false, NoVerdict}, // the call's deadline
		{codes.NotFound, true, false, NoVerdict},
	} {
		if got := VerdictOf(tc.code, tc.fromUpstream, tc.ctxDone); got != tc.want {
			t.Errorf("VerdictOf(%s, %v, %v) = %d, want %d", tc.code, tc.fromUpstream, tc.ctxDone, got, tc.want)
		}
	}
}

// A replica whose least latency of the last seconds is over twice the
// others' median is ejected once it answered enough calls; a healthy one
// with a slow answer now and then (a long tail, queueing) is not.
// An endpoint failing every other call never fails five in a row; its
// failure ratio ejects it once enough calls judged it, and a healthy
// one with a failure now and then is not.
func TestFailureRatioEjection(t *testing.T) {
	u := testPool(4, BalanceLatency)
	list := u.Endpoints()
	now := time.Unix(1000, 0)
	flaky, fine := list[0], list[1]
	for i := range 2 * ratioMinCalls {
		f := Answered
		if i%2 == 1 {
			f = Failed
		}
		u.release(flaky, "", now, time.Millisecond, f)
		u.release(fine, "", now, time.Millisecond, map[bool]Verdict{true: Failed, false: Answered}[i%10 == 9])
	}
	if flaky.usable(now.UnixNano()) {
		t.Fatalf("half of %d calls failed and it was not ejected", 2*ratioMinCalls)
	}
	if w := flaky.why.Load(); w == nil || !strings.Contains(*w, "of its last") {
		t.Errorf("why: %v, want the failure ratio", w)
	}
	if !fine.usable(now.UnixNano()) {
		t.Errorf("one call in ten failed and it was ejected: %s", *fine.why.Load())
	}
}

func TestLatencyOutlierEjection(t *testing.T) {
	u := testPool(4, BalanceLatency)
	list := u.Endpoints()
	now := time.Unix(1000, 0)
	for i := range 40 {
		for j, e := range list {
			d := 5 * time.Millisecond
			switch {
			case j == 1:
				d = 22 * time.Millisecond
			case j == 2 && i%7 == 0:
				d = 40 * time.Millisecond // a long tail
			case j == 3:
				d += time.Duration(i%4) * 5 * time.Millisecond // queueing
			}
			if e.usable(now.UnixNano()) {
				u.release(e, "", now, d, Answered)
			}
		}
		now = now.Add(50 * time.Millisecond)
	}
	for j, e := range list {
		ejected := e.ejectedUntil.Load() > now.UnixNano()
		if ejected != (j == 1) {
			t.Errorf("endpoint %d ejected %v, want only the slow one (1); why: %v", j, ejected, e.why.Load())
		}
	}
	if w := list[1].why.Load(); w == nil || !strings.Contains(*w, "slow") {
		t.Errorf("why %v", w)
	}
}

// A model's calls go only to the endpoints that hold it: those whose
// index lists it ready, and those that cannot say until they answer
// NOT_FOUND for it; a model nobody holds goes anywhere (for the
// replica's own answer).
func TestPickerSendsAModelWhereItIs(t *testing.T) {
	u := testPool(3, BalanceLatency)
	list := u.Endpoints()
	list[0].setReady(map[string]bool{"resnet50": true})
	list[1].setReady(map[string]bool{"resnet50": true, "bert": true})
	list[2].setReady(nil) // TF-Serving: cannot say
	now := time.Unix(1000, 0).UnixNano()
	picks := func(model string) map[string]bool {
		m := map[string]bool{}
		for range 200 {
			m[u.pick(now, model).addr] = true
		}
		return m
	}
	if got := picks("bert"); got["a"] || !got["b"] || !got["c"] {
		t.Errorf("bert went to %v, want b and c (a lacks it)", got)
	}
	list[2].markAbsent("bert", now)
	if got := picks("bert"); len(got) != 1 || !got["b"] {
		t.Errorf("bert after c's NOT_FOUND went to %v, want b only", got)
	}
	if got := picks("bert"); got["c"] {
		t.Errorf("bert on c: %v", got)
	}
	later := now + int64(absentFor) + 1
	if !list[2].holds("bert", later) {
		t.Error("c still left out for bert after absentFor")
	}
	list[1].markAbsent("bert", now)
	if got := picks("bert"); len(got) < 2 {
		t.Errorf("bert, held by none now, went to %v only, want anywhere", got)
	}
	if got := picks(""); len(got) != 3 {
		t.Errorf("a call naming no model went to %v, want every endpoint", got)
	}
}

// What an endpoint is remembered to lack is bounded: made-up model names
// answered NOT_FOUND must not grow what every answer copies.
func TestAbsentModelsBounded(t *testing.T) {
	e := &Endpoint{addr: "a"}
	now := time.Unix(1000, 0).UnixNano()
	for i := range 10 * maxAbsent {
		e.markAbsent(fmt.Sprintf("made-up-%d", i), now)
	}
	e.markAbsent(strings.Repeat("x", 1<<20), now)
	if n := len(e.models.Load().absent); n != maxAbsent {
		t.Errorf("%d models remembered absent, want at most %d", n, maxAbsent)
	}
	later := now + int64(absentFor) + 1
	e.markAbsent("real", later)
	if !(e.models.Load().absent["real"] > later) {
		t.Error("once the entries expired, a new one is not remembered")
	}
}

// A new or returning endpoint takes a tenth of its share at first and
// its full share once its slow start is over: with the others holding 3
// calls each, an idle newcomer is not handed the next call at once.
func TestEndpointSlowStart(t *testing.T) {
	u := testPool(4, BalanceLatency)
	u.slowStart = 10 * time.Second
	now := time.Unix(1000, 0)
	list := u.Endpoints()
	for _, e := range list {
		e.observe(now, 5*time.Millisecond)
	}
	for _, e := range list[:3] {
		e.inFlight.Store(3)
	}
	newcomer := list[3]
	newcomer.since.Store(now.UnixNano())
	if e := u.pick(now.UnixNano(), ""); e == newcomer {
		t.Errorf("at its start, the newcomer took the call over endpoints with 3 in flight")
	}
	if e := u.pick(now.Add(5*time.Second).UnixNano(), ""); e != newcomer {
		t.Errorf("half through its slow start, the newcomer (weight 0.5, load 2) lost to endpoints with 3 in flight (load 4)")
	}
	if w := newcomer.weight(now.Add(time.Minute).UnixNano(), u.slowStart); w != 1 {
		t.Errorf("weight after the slow start %v, want 1", w)
	}
}
