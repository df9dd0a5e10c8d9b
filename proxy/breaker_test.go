package proxy

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
		b := newBreaker("up", BreakerConfig{OpenFor: 5 * time.Second, Probes: 2}, time.Now,
			func(_ *breaker, from, to BreakerState) { changes = append(changes, from.String()+">"+to.String()) })
		for i := range 4 {
			b.record(true)
			if b.State() != BreakerClosed {
				t.Fatalf("open after %d failures, want 5", i+1)
			}
		}
		b.record(false) // a success resets the run
		for range 4 {
			b.record(true)
		}
		if b.State() != BreakerClosed {
			t.Fatal("4 failures after a success opened it")
		}
		b.record(true)
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
		p1(false)
		p2(true) // one failed probe: open again, as long as before
		if b.State() != BreakerOpen {
			t.Fatalf("state %s after a failed probe, want open", b.State())
		}
		time.Sleep(5*time.Second + time.Millisecond)
		p1, _ = b.admit()
		p2, _ = b.admit()
		p1(false)
		p2(false)
		if b.State() != BreakerClosed {
			t.Fatalf("state %s after 2 good probes, want closed", b.State())
		}
		if got := len(changes); got != 5 {
			t.Errorf("changes %v, want closed>open, open>half-open, half-open>open, open>half-open, half-open>closed", changes)
		}
		// Closed again: old failures are forgotten.
		b.record(true)
		if b.State() != BreakerClosed {
			t.Error("one failure after closing opened it")
		}
	})
}

// The ratio rule needs MinCalls calls in the window, and the window
// forgets old seconds.
func TestBreakerFailureRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("up", BreakerConfig{ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 20, Window: 10 * time.Second}, time.Now, nil)
		for i := range 18 {
			b.record(i%2 == 0)
		}
		if b.State() != BreakerClosed {
			t.Fatal("opened below MinCalls")
		}
		time.Sleep(11 * time.Second) // those 18 leave the window
		for i := range 19 {
			b.record(i%3 == 0) // 7 of 19 failed
		}
		if b.State() != BreakerClosed {
			t.Fatalf("opened at 7/19 failed; calls, failures = %v", fmt2(b.counts()))
		}
		b.record(true)
		b.record(true)
		b.record(true) // 10 of 22
		if b.State() != BreakerClosed {
			t.Fatal("opened at 10/22")
		}
		b.record(true) // 11 of 23
		b.record(true) // 12 of 24: half
		if b.State() != BreakerOpen {
			t.Fatalf("state %s at 12/24 failed, want open", b.State())
		}
	})
}

func fmt2(a, b int64) [2]int64 { return [2]int64{a, b} }

// Which results are failures: the configured codes and slow calls; a
// client's mistake is the upstream answering.
func TestBreakerIsFailure(t *testing.T) {
	b := newBreaker("up", BreakerConfig{SlowCall: 100 * time.Millisecond}, time.Now, nil)
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
		b := newBudget(BudgetConfig{Ratio: 0.2, MinPerSecond: 1}, time.Now)
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
		off := newBudget(BudgetConfig{Ratio: -1}, time.Now)
		if off.take() {
			t.Error("a disabled budget allowed a try")
		}
	})
}

// An upstream that copes with probes but not with the full load opens its
// breaker again soon after closing: each such opening lasts longer (up to
// 4 x OpenFor); one that stayed closed for a window starts again at 1x.
func TestBreakerBacksOffWhenItReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("up", BreakerConfig{OpenFor: time.Second, Probes: 1, Window: 10 * time.Second}, time.Now, nil)
		trip := func() {
			for range 5 {
				b.record(true)
			}
		}
		openFor := func() time.Duration { return time.Duration(b.openUntil.Load() - time.Now().UnixNano()) }
		closeIt := func() {
			time.Sleep(openFor() + time.Millisecond)
			p, ok := b.admit()
			if !ok || p == nil {
				t.Fatal("no probe after the open time")
			}
			p(false)
		}
		var got []time.Duration
		for range 4 {
			trip()
			got = append(got, openFor())
			closeIt()
		}
		time.Sleep(10 * time.Second) // closed for a whole window
		trip()
		got = append(got, openFor())
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, time.Second}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("open times %v, want %v", got, want)
			}
		}
	})
}

// After closing, the share of calls the upstream gets grows from 10% to
// all over SlowStart.
func TestBreakerSlowStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker("up", BreakerConfig{OpenFor: 2 * time.Second, Probes: 1}, time.Now, nil)
		if s := b.share(); s != 1 {
			t.Fatalf("share %v before any trip, want 1", s)
		}
		for range 5 {
			b.record(true)
		}
		time.Sleep(2*time.Second + time.Millisecond)
		p, _ := b.admit()
		p(false)
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
