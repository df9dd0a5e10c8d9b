package route

import (
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
)

// The breaker's life on a fake clock: consecutive failures open it, it
// refuses calls for OpenFor, lets Probes probes through half-open, and
// closes when they all succeed; a failed probe opens it again.
func TestBreakerLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		b := NewBreaker("up", "m", BreakerConfig{OpenFor: 5 * time.Second, Probes: 2}, time.Now,
			func(_ *Breaker, from, to BreakerState) { changes = append(changes, from.String()+">"+to.String()) })
		for i := range 4 {
			b.Record(VerdictFailed)
			if b.State() != BreakerClosed {
				t.Fatalf("open after %d failures, want 5", i+1)
			}
		}
		b.Record(VerdictOK) // a success resets the run
		for range 4 {
			b.Record(VerdictFailed)
		}
		if b.State() != BreakerClosed {
			t.Fatal("4 failures after a success opened it")
		}
		b.Record(VerdictFailed)
		if b.State() != BreakerOpen {
			t.Fatalf("state %s after 5 failures in a row, want open", b.State())
		}
		if _, ok := b.Admit(); ok {
			t.Fatal("admitted while open")
		}
		time.Sleep(5*time.Second + time.Millisecond)
		p1, ok1 := b.Admit()
		p2, ok2 := b.Admit()
		if _, ok3 := b.Admit(); !ok1 || !ok2 || ok3 || p1 == nil || p2 == nil {
			t.Fatalf("half-open admits %v %v %v, want exactly 2 probes", ok1, ok2, ok3)
		}
		p1(VerdictOK)
		p2(VerdictFailed) // one failed probe: open again, as long as before
		if b.State() != BreakerOpen {
			t.Fatalf("state %s after a failed probe, want open", b.State())
		}
		time.Sleep(5*time.Second + time.Millisecond)
		p1, _ = b.Admit()
		p2, _ = b.Admit()
		p1(VerdictOK)
		p2(VerdictOK)
		if b.State() != BreakerClosed {
			t.Fatalf("state %s after 2 good probes, want closed", b.State())
		}
		if got := len(changes); got != 5 {
			t.Errorf("changes %v, want closed>open, open>half-open, half-open>open, open>half-open, half-open>closed", changes)
		}
		// Closed again: old failures are forgotten.
		b.Record(VerdictFailed)
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
		b := NewBreaker("up", "m", BreakerConfig{OpenFor: time.Second, Probes: 1, ConsecutiveFailures: 1}, time.Now, nil)
		b.Record(VerdictFailed)
		time.Sleep(time.Second + time.Millisecond)
		p, ok := b.Admit()
		if !ok || p == nil {
			t.Fatal("no probe after open_for")
		}
		p(VerdictNone)
		if b.State() != BreakerHalfOpen {
			t.Fatalf("state %s after a cancelled probe, want still half-open", b.State())
		}
		p, ok = b.Admit()
		if !ok || p == nil {
			t.Fatal("the cancelled probe kept the next one out")
		}
		p(VerdictOK)
		if b.State() != BreakerClosed {
			t.Fatalf("state %s after a good probe, want closed", b.State())
		}
	})
}

// forgets old seconds.
func TestBreakerFailureRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker("up", "m", BreakerConfig{ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 20, Window: 10 * time.Second}, time.Now, nil)
		for i := range 18 {
			b.Record(failedIf(i%2 == 0))
		}
		if b.State() != BreakerClosed {
			t.Fatal("opened below MinCalls")
		}
		time.Sleep(11 * time.Second) // those 18 leave the window
		for i := range 19 {
			b.Record(failedIf(i%3 == 0)) // 7 of 19 failed
		}
		if b.State() != BreakerClosed {
			t.Fatalf("opened at 7/19 failed; calls, failures = %v", fmt2(b.Counts()))
		}
		b.Record(VerdictFailed)
		b.Record(VerdictFailed)
		b.Record(VerdictFailed) // 10 of 22
		if b.State() != BreakerClosed {
			t.Fatal("opened at 10/22")
		}
		b.Record(VerdictFailed) // 11 of 23
		b.Record(VerdictFailed) // 12 of 24: half
		if b.State() != BreakerOpen {
			t.Fatalf("state %s at 12/24 failed, want open", b.State())
		}
	})
}

func fmt2(a, b int64) [2]int64 { return [2]int64{a, b} }

// Which results are failures: the configured codes and slow calls; a
// client's mistake is the upstream answering.
func TestBreakerIsFailure(t *testing.T) {
	b := NewBreaker("up", "m", BreakerConfig{SlowCall: 100 * time.Millisecond}, time.Now, nil)
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
		if got := b.IsFailure(tc.code, tc.took); got != tc.want {
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
		b := NewRetryBudget(BudgetConfig{Ratio: 0.2, MinPerSecond: 1}, time.Now)
		n := 0
		for b.Take() {
			n++
		}
		if n != 10 {
			t.Fatalf("%d tries at start, want 10 (ten seconds of the floor)", n)
		}
		for range 100 {
			b.Deposit()
		}
		n = 0
		for b.Take() {
			n++
		}
		if n != 10 { // 100 × 0.2 = 20, capped at 10 until a second passes
			t.Errorf("%d tries after 100 first tries in the first second, want 10 (cap)", n)
		}
		time.Sleep(time.Second)
		for range 100 {
			b.Deposit()
		}
		n = 0
		for b.Take() {
			n++
		}
		if n < 20 || n > 21 {
			t.Errorf("%d tries after 100 first tries with a raised cap, want 20 (+1 floor)", n)
		}
		off := NewRetryBudget(BudgetConfig{Ratio: -1}, time.Now)
		if off.Take() {
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
		b := NewBreaker("up", "m", BreakerConfig{OpenFor: time.Second, Probes: 1, Window: 10 * time.Second}, time.Now, nil)
		trip := func() {
			for range 5 {
				b.Record(VerdictFailed)
			}
		}
		openFor := func() time.Duration { return time.Duration(b.openUntil.Load() - time.Now().UnixNano()) }
		closeIt := func() {
			time.Sleep(openFor() + time.Millisecond)
			p, ok := b.Admit()
			if !ok || p == nil {
				t.Fatal("no probe after the open time")
			}
			p(VerdictOK)
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
		var none *Breaker
		if !none.Settled() {
			t.Error("no breaker: not settled")
		}
		b := NewBreaker("up", "m", BreakerConfig{OpenFor: time.Second, Probes: 1}, time.Now, nil)
		if !b.Settled() {
			t.Error("closed breaker: not settled")
		}
		for range 5 {
			b.Record(VerdictFailed)
		}
		if b.Settled() {
			t.Error("open breaker: settled")
		}
		time.Sleep(time.Second + time.Millisecond)
		p, ok := b.Admit()
		if !ok || p == nil {
			t.Fatal("no probe after the open time")
		}
		if b.Settled() {
			t.Error("half-open breaker: settled")
		}
		p(VerdictOK)
		if b.State() != BreakerClosed || b.Settled() {
			t.Errorf("breaker %s in its slow start: settled %v, want closed and not settled", b.State(), b.Settled())
		}
		time.Sleep(b.cfg.SlowStart)
		if !b.Settled() {
			t.Error("closed breaker after its slow start: not settled")
		}
	})
}

// After closing, the share of calls the upstream gets grows from 10% to
// all over SlowStart (by default half of OpenFor).
func TestBreakerSlowStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker("up", "m", BreakerConfig{OpenFor: 4 * time.Second, Probes: 1}, time.Now, nil)
		if s := b.Share(); s != 1 {
			t.Fatalf("share %v before any trip, want 1", s)
		}
		for range 5 {
			b.Record(VerdictFailed)
		}
		time.Sleep(4*time.Second + time.Millisecond)
		p, _ := b.Admit()
		p(VerdictOK)
		if s := b.Share(); s < 0.1 || s > 0.11 {
			t.Errorf("share %v just after closing, want 0.1", s)
		}
		time.Sleep(time.Second)
		if s := b.Share(); s < 0.54 || s > 0.56 {
			t.Errorf("share %v halfway, want 0.55", s)
		}
		time.Sleep(time.Second)
		if s := b.Share(); s != 1 {
			t.Errorf("share %v after the slow start, want 1", s)
		}
	})
}

// failedIf is the verdict of a call of the model that failed or not.
func failedIf(failed bool) Verdict {
	if failed {
		return VerdictFailed
	}
	return VerdictOK
}
