package proxy

import (
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/monitor"
)

// The breaker's life on a fake clock: consecutive failures open it, it
// refuses calls for OpenFor, lets Probes probes through half-open, and
// closes when they all succeed; a failed probe opens it again.
func TestBreakerLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		b := newBreaker("up", "m", BreakerConfig{OpenFor: 5 * time.Second, Probes: 2}, time.Now,
			func(_ *breaker, from, to BreakerState) { changes = append(changes, from.String()+">"+to.String()) })
		for i := range 4 {
			b.record(verdictFailed)
			if b.State() != BreakerClosed {
				t.Fatalf("open after %d failures, want 5", i+1)
			}
		}
		b.record(verdictOK) // a success resets the run
		for range 4 {
			b.record(verdictFailed)
		}
		if b.State() != BreakerClosed {
			t.Fatal("4 failures after a success opened it")
		}
		b.record(verdictFailed)
		if b.State() != BreakerOpen {
			t.Fatalf("state %s after 5 failures in a row, want open", b.State())
		}
		if _, ok := b.admit(); ok {
			t.Fatal("admitted while open")
		}
		time.Sleep(5*time.Second + time.Millisecond)
		p1, ok1 := b.admit()
		p2, ok2 := b.admit()
		if _, ok3 := b.admit(); !ok1 || !ok2 || ok3 || p1 == nil || p2 == nil {
			t.Fatalf("half-open admits %v %v %v, want exactly 2 probes", ok1, ok2, ok3)
		}
		p1(verdictOK)
		p2(verdictFailed) // one failed probe: open again, as long as before
		if b.State() != BreakerOpen {
			t.Fatalf("state %s after a failed probe, want open", b.State())
		}
		time.Sleep(5*time.Second + time.Millisecond)
		p1, _ = b.admit()
		p2, _ = b.admit()
		p1(verdictOK)
		p2(verdictOK)
		if b.State() != BreakerClosed {
			t.Fatalf("state %s after 2 good probes, want closed", b.State())
		}
		if got := len(changes); got != 5 {
			t.Errorf("changes %v, want closed>open, open>half-open, half-open>open, open>half-open, half-open>closed", changes)
		}
		// Closed again: old failures are forgotten.
		b.record(verdictFailed)
		if b.State() != BreakerClosed {
			t.Error("one failure after closing opened it")
		}
	})
}

// The ratio rule needs MinCalls calls in the window, and the window
// A probe whose caller gave up says nothing of the upstream: it neither
// closes the breaker nor keeps another probe out.
func TestBreakerCancelledProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("up", "m", BreakerConfig{OpenFor: time.Second, Probes: 1, ConsecutiveFailures: 1}, time.Now, nil)
		b.record(verdictFailed)
		time.Sleep(time.Second + time.Millisecond)
		p, ok := b.admit()
		if !ok || p == nil {
			t.Fatal("no probe after open_for")
		}
		p(verdictNone)
		if b.State() != BreakerHalfOpen {
			t.Fatalf("state %s after a cancelled probe, want still half-open", b.State())
		}
		p, ok = b.admit()
		if !ok || p == nil {
			t.Fatal("the cancelled probe kept the next one out")
		}
		p(verdictOK)
		if b.State() != BreakerClosed {
			t.Fatalf("state %s after a good probe, want closed", b.State())
		}
	})
}

// forgets old seconds.
func TestBreakerFailureRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("up", "m", BreakerConfig{ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 20, Window: 10 * time.Second}, time.Now, nil)
		for i := range 18 {
			b.record(failedIf(i%2 == 0))
		}
		if b.State() != BreakerClosed {
			t.Fatal("opened below MinCalls")
		}
		time.Sleep(11 * time.Second) // those 18 leave the window
		for i := range 19 {
			b.record(failedIf(i%3 == 0)) // 7 of 19 failed
		}
		if b.State() != BreakerClosed {
			t.Fatalf("opened at 7/19 failed; calls, failures = %v", fmt2(b.counts()))
		}
		b.record(verdictFailed)
		b.record(verdictFailed)
		b.record(verdictFailed) // 10 of 22
		if b.State() != BreakerClosed {
			t.Fatal("opened at 10/22")
		}
		b.record(verdictFailed) // 11 of 23
		b.record(verdictFailed) // 12 of 24: half
		if b.State() != BreakerOpen {
			t.Fatalf("state %s at 12/24 failed, want open", b.State())
		}
	})
}

func fmt2(a, b int64) [2]int64 { return [2]int64{a, b} }

// Which results are failures: the configured codes and slow calls; a
// client's mistake is the upstream answering.
func TestBreakerIsFailure(t *testing.T) {
	b := newBreaker("up", "m", BreakerConfig{SlowCall: 100 * time.Millisecond}, time.Now, nil)
	for _, tc := range []struct {
		code codes.Code
		took time.Duration
		want bool
	}{
		{codes.OK, time.Millisecond, false},
		{codes.OK, time.Second, true},
		{codes.Unavailable, 0, true},
		{codes.DeadlineExceeded, 0, true},
		{codes.Internal, 0, true},
		{codes.InvalidArgument, 0, false},
		{codes.NotFound, 0, false},
		{codes.Canceled, 0, false},
	} {
		if got := b.isFailure(tc.code, tc.took); got != tc.want {
			t.Errorf("isFailure(%s, %s) = %v, want %v", tc.code, tc.took, got, tc.want)
		}
	}
	if err := (BreakerConfig{FailureRatio: 2}).Validate(); err == nil {
		t.Error("failure_ratio 2 accepted")
	}
	if err := (BreakerConfig{FailureCodes: []codes.Code{codes.OK}}).Validate(); err == nil {
		t.Error("OK as a failure code accepted")
	}
}

// The budget allows Ratio of first tries, a floor per second, and no more
// than ten seconds' worth at once.
func TestBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newRetryBudget(BudgetConfig{Ratio: 0.2, MinPerSecond: 1}, time.Now)
		n := 0
		for b.take() {
			n++
		}
		if n != 10 {
			t.Fatalf("%d tries at start, want 10 (ten seconds of the floor)", n)
		}
		for range 100 {
			b.deposit()
		}
		n = 0
		for b.take() {
			n++
		}
		if n != 10 { // 100 × 0.2 = 20, capped at 10 until a second passes
			t.Errorf("%d tries after 100 first tries in the first second, want 10 (cap)", n)
		}
		time.Sleep(time.Second)
		for range 100 {
			b.deposit()
		}
		n = 0
		for b.take() {
			n++
		}
		if n < 20 || n > 21 {
			t.Errorf("%d tries after 100 first tries with a raised cap, want 20 (+1 floor)", n)
		}
		off := newRetryBudget(BudgetConfig{Ratio: -1}, time.Now)
		if off.take() {
			t.Error("a disabled budget allowed a try")
		}
	})
}

// An upstream that copes with probes but not with the full load opens its
// breaker again soon after closing. Caught during the slow start (with a
// share of the calls), it is probed again after OpenFor; after the slow
// start gave it all calls back, it stays open twice as long (never more: a
// healed upstream must not wait long to be tried); one that stayed closed
// for a window starts again at 1x.
func TestBreakerBacksOffWhenItReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("up", "m", BreakerConfig{OpenFor: time.Second, Probes: 1, Window: 10 * time.Second}, time.Now, nil)
		trip := func() {
			for range 5 {
				b.record(verdictFailed)
			}
		}
		openFor := func() time.Duration { return time.Duration(b.openUntil.Load() - time.Now().UnixNano()) }
		closeIt := func() {
			time.Sleep(openFor() + time.Millisecond)
			p, ok := b.admit()
			if !ok || p == nil {
				t.Fatal("no probe after the open time")
			}
			p(verdictOK)
		}
		var got []time.Duration
		for range 3 { // tripped again during each slow start (500ms)
			trip()
			got = append(got, openFor())
			closeIt()
			time.Sleep(100 * time.Millisecond)
		}
		for range 3 { // tripped again after each slow start
			time.Sleep(time.Second)
			trip()
			got = append(got, openFor())
			closeIt()
		}
		time.Sleep(10 * time.Second) // closed for a whole window
		trip()
		got = append(got, openFor())
		want := []time.Duration{time.Second, time.Second, time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, time.Second}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("open times %v, want %v", got, want)
			}
		}
	})
}

// The primary's latency is learnt for hedging only once its breaker is
// closed and its slow start over: open, probing or ramping, it is in
// trouble and its answers are not its healthy tail.
func TestBreakerSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var none *breaker
		if !none.settled() {
			t.Error("no breaker: not settled")
		}
		b := newBreaker("up", "m", BreakerConfig{OpenFor: time.Second, Probes: 1}, time.Now, nil)
		if !b.settled() {
			t.Error("closed breaker: not settled")
		}
		for range 5 {
			b.record(verdictFailed)
		}
		if b.settled() {
			t.Error("open breaker: settled")
		}
		time.Sleep(time.Second + time.Millisecond)
		p, ok := b.admit()
		if !ok || p == nil {
			t.Fatal("no probe after the open time")
		}
		if b.settled() {
			t.Error("half-open breaker: settled")
		}
		p(verdictOK)
		if b.State() != BreakerClosed || b.settled() {
			t.Errorf("breaker %s in its slow start: settled %v, want closed and not settled", b.State(), b.settled())
		}
		time.Sleep(b.cfg.SlowStart)
		if !b.settled() {
			t.Error("closed breaker after its slow start: not settled")
		}
	})
}

// After closing, the share of calls the upstream gets grows from 10% to
// all over SlowStart (by default half of OpenFor).
func TestBreakerSlowStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("up", "m", BreakerConfig{OpenFor: 4 * time.Second, Probes: 1}, time.Now, nil)
		if s := b.share(); s != 1 {
			t.Fatalf("share %v before any trip, want 1", s)
		}
		for range 5 {
			b.record(verdictFailed)
		}
		time.Sleep(4*time.Second + time.Millisecond)
		p, _ := b.admit()
		p(verdictOK)
		if s := b.share(); s < 0.1 || s > 0.11 {
			t.Errorf("share %v just after closing, want 0.1", s)
		}
		time.Sleep(time.Second)
		if s := b.share(); s < 0.54 || s > 0.56 {
			t.Errorf("share %v halfway, want 0.55", s)
		}
		time.Sleep(time.Second)
		if s := b.share(); s != 1 {
			t.Errorf("share %v after the slow start, want 1", s)
		}
	})
}

// spread interleaves: in every 20 consecutive calls a share s sends close
// to 20s of them.
func TestSpreadInterleaves(t *testing.T) {
	for _, s := range []float64{0.1, 0.5, 0.9} {
		for start := uint64(0); start < 1000; start += 20 {
			n := 0
			for i := start; i < start+20; i++ {
				if spread(i) < s {
					n++
				}
			}
			if d := float64(n) - 20*s; d < -2 || d > 2 {
				t.Fatalf("share %v: %d of 20 calls from %d", s, n, start)
			}
		}
	}
}

// Hedges that won took the slowest calls away from the primary's answered
// ones: the tail estimate counts them at the top, so hedging cannot lower
// its own delay and end up sending a healthy primary's tail to the
// lighter model.
func TestCensoredTail(t *testing.T) {
	ms := time.Millisecond
	st := monitor.Stats{Count: 19990, P50: 6 * ms, P90: 8 * ms, P99: 30 * ms, P999: 40 * ms, Max: 45 * ms}
	for _, c := range []struct {
		name string
		won  uint64
		prev time.Duration
		want time.Duration
	}{
		{"no hedges: the answered calls' p99.9", 0, 0, 40 * ms},
		// 10 of 20000 hedged: 10 answered calls above the true p99.9 of
		// 20000, a quantile above the answered calls' p99.9: read on the
		// slow side.
		{"a few hedges: a higher quantile", 10, 42 * ms, 45 * ms},
		{"hedges are 0.1% of calls: beyond the delay, hold", 25, 50 * ms, 50 * ms},
		{"hedges 0.1%, no estimate yet: the answered p99.9", 25, 0, 40 * ms},
		{"a sudden drop is taken down by a tenth", 0, 100 * ms, 90 * ms},
		{"a sudden rise is taken up by a tenth", 0, 10 * ms, 11 * ms},
		{"a slowdown's answers with hedges winning: up by a tenth", 25, 20 * ms, 22 * ms},
		// A model whose calls take seconds keeps a tail of seconds: no cap
		// hedges all of its healthy calls.
		{"not capped", 0, 2 * time.Second, 1800 * ms},
		{"no estimate yet: the answered p99.9", 0, 0, 40 * ms},
	} {
		if got := censoredTail(st, c.won, c.prev); got != c.want {
			t.Errorf("%s: censoredTail(won %d, prev %s) = %s, want %s", c.name, c.won, c.prev, got, c.want)
		}
	}
}

// The feedback loop of automatic hedging, window by window, on a latency
// like simserver's resnet50 (a 6-9 ms body, a tail of 0.05-2% of calls
// 4-8x slower): with the won hedges counted, the delay settles at 3x the
// true p99.9 and hedges at most about 0.1% of calls; reading only the answered calls'
// quantile walks the delay down into the body and hedges the whole tail
// (calls answered by the lighter model while the primary is healthy).
func TestAutoHedgeDelayDoesNotFeedOnItself(t *testing.T) {
	for _, tail := range []float64{0.0005, 0.001, 0.0015, 0.003, 0.01, 0.02} {
		for seed := range uint64(5) {
			hedged, naive := autoHedgeLoop(tail, seed)
			// A tail of about 0.1% of the calls leaves the p99.9 between
			// body and tail: hedging that tail is the definition's own
			// ambiguity, not the feedback.
			if hedged > 0.002 {
				t.Errorf("tail %.2f%%, seed %d: with won hedges counted, %.2f%% of a healthy primary's calls were hedged, want <= 0.2%%",
					100*tail, seed, 100*hedged)
			}
			if tail == 0.0015 && naive < 0.001 {
				t.Errorf("tail %.2f%%, seed %d: the answered calls' quantile alone hedged %.2f%%: the test no longer shows the feedback",
					100*tail, seed, 100*naive)
			}
		}
	}
}

// autoHedgeLoop runs the hedge delay's feedback loop for 60 windows of
// 2000 calls and returns the share of calls hedged in the last 30 with
// censoredTail and with the answered calls' p99.9 alone.
func autoHedgeLoop(tail float64, seed uint64) (hedged, naive float64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	draw := func() time.Duration {
		d := 6*time.Millisecond + time.Duration(rng.Float64()*float64(3*time.Millisecond))
		if rng.Float64() < tail {
			d *= time.Duration(4 + rng.IntN(5))
		}
		return d
	}
	run := func(estimate func(st monitor.Stats, won uint64, prev time.Duration) time.Duration) float64 {
		var est time.Duration
		var hedged, calls int
		for w := range 60 {
			delay := time.Second
			if est > 0 {
				delay = min(max(3*est, 10*time.Millisecond), time.Second)
			}
			var answered []time.Duration
			won := 0
			for range 2000 {
				if d := draw(); d > delay {
					won++
				} else {
					answered = append(answered, d)
				}
			}
			if w >= 30 {
				hedged += won
				calls += 2000
			}
			slices.Sort(answered)
			q := func(f float64) time.Duration { return answered[int(f*float64(len(answered)-1))] }
			st := monitor.Stats{Count: uint64(len(answered)), P50: q(0.5), P90: q(0.9), P99: q(0.99), P999: q(0.999), Max: answered[len(answered)-1]}
			est = estimate(st, uint64(won), est)
		}
		return float64(hedged) / float64(calls)
	}
	answeredTail := func(st monitor.Stats, _ uint64, _ time.Duration) time.Duration { return st.P999 }
	return run(censoredTail), run(answeredTail)
}

// failedIf is the verdict of a call of the model that failed or not.
func failedIf(failed bool) verdict {
	if failed {
		return verdictFailed
	}
	return verdictOK
}
