package batcher

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// resnetLatency is simserver's resnet50: 5 ms + 0.25 ms a row, and one
// execution in a hundred 4 to 8 times slower (the long tail), drawn from a
// seeded source so every run meets the same slow executions.
func resnetLatency(seed uint64) func(int) time.Duration {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 7))
	return func(n int) time.Duration {
		d := 5*time.Millisecond + time.Duration(n)*250*time.Microsecond
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < 0.01 {
			d = time.Duration(float64(d) * (4 + 4*rng.Float64()))
		}
		return d
	}
}

// resnetUnbatched is the rate one slot serves one row at a time.
const resnetUnbatched = float64(time.Second) / float64(5*time.Millisecond+250*time.Microsecond)

// openLoad is what openLoop saw: the latency of each successful call (from
// its arrival to its answer) and the error of each failed one.
type openLoad struct {
	ok   []time.Duration
	errs []error
	sent int
}

// p99 is the strict p99 of the successful calls: the latency 99% of them
// stay within.
func (o openLoad) p99() time.Duration {
	s := slices.Clone(o.ok)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[(len(s)*99+99)/100-1]
}

// openLoop sends Poisson arrivals at rate per second for d and waits for
// every answer.
func openLoop(t *testing.T, h *harness, rate float64, d time.Duration, seed uint64) openLoad {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var (
		mu  sync.Mutex
		out openLoad
		wg  sync.WaitGroup
	)
	for end := time.Now().Add(d); time.Now().Before(end); out.sent++ {
		id := fmt.Sprintf("s%dn%d", seed, out.sent)
		wg.Go(func() {
			t0 := time.Now()
			res, err := h.do(t.Context(), "a 1 "+id, nil)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				out.errs = append(out.errs, err)
			case string(res.Payload) != "resp "+id:
				t.Errorf("call %s: got %q", id, res.Payload)
			default:
				out.ok = append(out.ok, took)
			}
		})
		time.Sleep(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
	}
	wg.Wait()
	return out
}

// TestShedKeepsP99WithinSLOAt8x: at 8x the unbatched capacity, with one
// slow execution in a hundred, sending every request makes the ones queued
// behind a slow execution late, so the p99 of the answered calls is past
// the SLO. With Shed, the calls that cannot be answered in time get
// RESOURCE_EXHAUSTED (ErrShed, an ErrQueueFull) instead, and the strict
// p99 of the answered ones stays within the SLO while almost all are
// answered.
func TestShedKeepsP99WithinSLOAt8x(t *testing.T) {
	const slo = 50 * time.Millisecond
	rate := 8 * resnetUnbatched
	run := func(shed bool) openLoad {
		var out openLoad
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 64, SLO: slo, Shed: shed})
			h.up.latency = resnetLatency(3)
			openLoop(t, h, rate, 200*time.Millisecond, 1) // teach the fit
			out = openLoop(t, h, rate, 3*time.Second, 2)
		})
		return out
	}
	sent := run(false)
	if p := sent.p99(); p <= slo || len(sent.errs) > 0 {
		t.Fatalf("without shedding: p99 %v, %d errors; want past the SLO %v and none (the long tail makes calls late)", p, len(sent.errs), slo)
	}
	got := run(true)
	if p := got.p99(); p > slo {
		t.Errorf("with shedding: strict p99 of %d answered calls %v, want <= SLO %v (without: %v)", len(got.ok), p, slo, sent.p99())
	}
	for _, err := range got.errs {
		if !errors.Is(err, ErrShed) || !errors.Is(err, ErrQueueFull) || !strings.Contains(err.Error(), "SLO") {
			t.Fatalf("shed call: %v, want ErrShed (RESOURCE_EXHAUSTED) naming the SLO", err)
		}
	}
	if answered := float64(len(got.ok)) / float64(got.sent); answered < 0.9 {
		t.Errorf("answered %d of %d calls (%.1f%%), want >= 90%%: shedding must cost little throughput", len(got.ok), got.sent, 100*answered)
	}
	t.Logf("8x: sent %d; without shedding p99 %v; with shedding p99 %v, %d shed", got.sent, sent.p99(), got.p99(), len(got.errs))
}

// TestShedKeepsBatchesFull: offered the model's best batch throughput
// (64 rows per 21 ms), shedding still serves at least 75% of it within
// the SLO: it refuses only what cannot be served in time, and the queue it
// keeps fills the batches.
func TestShedKeepsBatchesFull(t *testing.T) {
	const slo = 50 * time.Millisecond
	limit := 64 / (5*time.Millisecond + 64*250*time.Microsecond).Seconds()
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 64, SLO: slo, Shed: true})
		h.up.latency = resnetLatency(5)
		openLoop(t, h, limit, 200*time.Millisecond, 1)
		const d = 2 * time.Second
		got := openLoop(t, h, limit, d, 2)
		if tput := float64(len(got.ok)) / d.Seconds(); tput < 0.75*limit {
			t.Errorf("answered %.0f/s of %.0f/s offered, want >= 75%% of the physical limit", tput, limit)
		}
		if p := got.p99(); p > slo {
			t.Errorf("strict p99 %v, want <= SLO %v", p, slo)
		}
		t.Logf("at the physical limit %.0f/s: answered %d of %d, p99 %v", limit, len(got.ok), got.sent, got.p99())
	})
}

// TestShedAddsNoWaitAtLowLoad: at a tenth of the unbatched capacity a
// shedding queue sends each request at once and refuses none: p99 is the
// same as without shedding.
func TestShedAddsNoWaitAtLowLoad(t *testing.T) {
	run := func(shed bool) openLoad {
		var out openLoad
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 64, SLO: 50 * time.Millisecond, Shed: shed})
			h.up.latency = resnetLatency(3)
			out = openLoop(t, h, resnetUnbatched/10, 10*time.Second, 4)
		})
		return out
	}
	plain, shed := run(false), run(true)
	if len(shed.errs) > 0 {
		t.Errorf("%d calls shed at low load (first: %v), want none", len(shed.errs), shed.errs[0])
	}
	if p, q := shed.p99(), plain.p99(); p > q*11/10 {
		t.Errorf("p99 %v with shedding, %v without: want within 1.1x", p, q)
	}
}

// TestShedRefusesAtArrival: a call that finds more work queued ahead than
// the SLO leaves room for is refused at once, not after waiting, and
// counted under reason "slo"; the calls admitted before it are answered.
func TestShedRefusesAtArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 4, SLO: 55 * time.Millisecond, Shed: true})
		h.up.latency = func(int) time.Duration { return 10 * time.Millisecond }
		for i := range 5 { // teach the fit: 10 ms a batch
			if _, err := h.do(t.Context(), fmt.Sprintf("a 1 w%d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		busy := h.goDo(t.Context(), "a 1 busy", nil) // in flight until 10 ms
		synctest.Wait()
		// Batches of 4 at 10 ms each: the slot frees at 10 ms, then 4
		// batches end by 50 ms; the 17th call would need a fifth, past
		// the SLO.
		var admitted []<-chan outcome
		for i := range 16 {
			admitted = append(admitted, h.goDo(t.Context(), fmt.Sprintf("a 1 q%d", i), nil))
			synctest.Wait()
		}
		t0 := time.Now()
		_, err := h.do(t.Context(), "a 1 late", nil)
		if !errors.Is(err, ErrShed) || time.Since(t0) != 0 {
			t.Fatalf("17th call: %v after %v, want ErrShed at once", err, time.Since(t0))
		}
		if want := "would answer in 60ms, past its SLO of 55ms"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to say %q", err, want)
		}
		<-busy
		for i, ch := range admitted {
			if o := <-ch; o.err != nil {
				t.Errorf("admitted call %d: %v", i, o.err)
			}
		}
		if n := h.b.models.Load(); (*n)["m"].rejected[reasonSLO].Load() != 1 {
			t.Errorf("rejected{reason=slo} = %d, want 1", (*n)["m"].rejected[reasonSLO].Load())
		}
	})
}

// TestShedDropsLateAtDispatch: calls admitted before a slow execution
// whose wait then used up the SLO are answered ErrShed when the slot
// frees, not sent late; the fresh calls behind them go in the batch.
func TestShedDropsLateAtDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 3, SLO: 50 * time.Millisecond, Shed: true})
		h.up.latency = func(int) time.Duration { return 5 * time.Millisecond }
		for i := range 5 {
			if _, err := h.do(t.Context(), fmt.Sprintf("a 1 w%d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		release := h.up.hold()
		busy := h.goDo(t.Context(), "a 1 busy", nil) // a slow execution holds the slot
		synctest.Wait()
		var old []<-chan outcome
		for _, id := range []string{"o0", "o1"} {
			old = append(old, h.goDo(t.Context(), "a 1 "+id, nil))
			synctest.Wait()
		}
		// The slow execution ends at 48 ms (43 held, then its 5): o0 and
		// o1 can no longer meet the SLO then (a batch takes 5 ms or
		// more), though it has not passed yet.
		time.Sleep(43 * time.Millisecond)
		fresh := h.goDo(t.Context(), "a 1 f0", nil)
		synctest.Wait()
		release()
		if o := <-busy; o.err != nil {
			t.Fatalf("slow call: %v", o.err)
		}
		for i, ch := range old {
			if o := <-ch; !errors.Is(o.err, ErrShed) || !strings.Contains(o.err.Error(), "waited 48ms in the batch queue") {
				t.Errorf("late call %d: %v, want ErrShed at dispatch, after 48ms", i, o.err)
			}
		}
		if o := <-fresh; o.err != nil {
			t.Fatalf("fresh call: %v", o.err)
		}
		var reqs []string
		for _, c := range h.up.received()[6:] {
			reqs = append(reqs, c.req)
		}
		if want := []string{"a 1 f0"}; !slices.Equal(reqs, want) {
			t.Errorf("upstream got %q, want only the fresh call %q", reqs, want)
		}
		if n := (*h.b.models.Load())["m"].rejected[reasonSLO].Load(); n != 2 {
			t.Errorf("rejected{reason=slo} = %d, want 2", n)
		}
	})
}

// TestShedBoundsCallsInFlight: a call whose batch is still running when
// its SLO passes (a slow execution) gets ErrShed at the SLO, alone or
// batched, and once every caller of a batch has gone the upstream call is
// cancelled.
func TestShedBoundsCallsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slo = 50 * time.Millisecond
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 4, SLO: slo, Shed: true})
		h.up.latency = func(int) time.Duration { return 5 * time.Millisecond }
		for i := range 5 {
			if _, err := h.do(t.Context(), fmt.Sprintf("a 1 w%d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		release := h.up.hold() // every execution from now on is slow
		defer release()
		t0 := time.Now()
		alone := h.goDo(t.Context(), "a 1 alone", nil)
		synctest.Wait()
		var batched []<-chan outcome
		for _, id := range []string{"b0", "b1"} {
			batched = append(batched, h.goDo(t.Context(), "a 1 "+id, nil))
			synctest.Wait()
		}
		for i, ch := range append([]<-chan outcome{alone}, batched...) {
			o := <-ch
			// At the SLO instant the in-flight timer and a dispatch-time
			// shed (the batch queued behind the slow one) both fire;
			// synctest runs timers of one instant in any order, and
			// either answer is the same promise kept: ErrShed at the SLO.
			if !errors.Is(o.err, ErrShed) || !strings.Contains(o.err.Error(), "SLO of 50ms") {
				t.Errorf("call %d: %v, want ErrShed at the SLO", i, o.err)
			}
			if took := time.Since(t0); took != slo {
				t.Errorf("call %d answered after %v, want at the SLO %v", i, took, slo)
			}
		}
		synctest.Wait()
		if st := h.stats(); st.InFlight != 0 {
			t.Errorf("%d batches in flight after every caller left, want the upstream calls cancelled", st.InFlight)
		}
		if n := (*h.b.models.Load())["m"].rejected[reasonSLO].Load(); n != 3 {
			t.Errorf("rejected{reason=slo} = %d, want 3", n)
		}
	})
}
