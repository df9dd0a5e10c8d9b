package batcher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/metadata"
)

// TestAdaptiveLowLoadNoWait: one request at a time is sent at once, alone:
// adaptive batching costs nothing at low load.
func TestAdaptiveLowLoadNoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 32})
		h.up.latency = func(n int) time.Duration { return 5*time.Millisecond + time.Duration(n)*250*time.Microsecond }
		for i := range 20 {
			res, err := h.do(t.Context(), fmt.Sprintf("a 1 r%d", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Queue != 0 || res.BatchSize != 1 {
				t.Fatalf("call %d: queued %v in a batch of %d, want 0 and 1", i, res.Queue, res.BatchSize)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestLoneRequestSentAsIs: a request that finds the queue empty and a slot
// free goes upstream exactly as the caller sent it, with all its metadata
// (no merge, no split). In adaptive mode and in static mode without delay
// it goes at once, from the caller's own goroutine and context (no
// hand-off to the dispatcher); with a static delay, after it, as a batch
// of one.
func TestLoneRequestSentAsIs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pol   Policy
		queue time.Duration
		own   bool // sent with the caller's own context
	}{
		{"adaptive", Policy{Mode: Adaptive}, 0, true},
		{"static no delay", Policy{Mode: Static, MaxSize: 8}, 0, true},
		{"static with delay", Policy{Mode: Static, MaxSize: 8, MaxDelay: time.Millisecond}, time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, tc.pol)
				md := metadata.Pairs("x-request-id", "42", "traceparent", "00-ab-cd-01")
				ctx := context.WithValue(t.Context(), callerTag{}, "caller")
				res, err := h.do(ctx, "a 1 r0", md)
				if err != nil || string(res.Payload) != "resp r0" || res.BatchSize != 1 || res.Queue != tc.queue {
					t.Fatalf("got %q %v in a batch of %d after %v, want a batch of 1 after %v", res.Payload, err, res.BatchSize, res.Queue, tc.queue)
				}
				got := h.up.received()
				if len(got) != 1 || got[0].req != "a 1 r0" {
					t.Fatalf("upstream got %+v, want the request as sent", got)
				}
				if own := got[0].tag == "caller"; own != tc.own {
					t.Errorf("sent with the caller's own context: %v, want %v", own, tc.own)
				}
				if g := got[0].md; g.Get("x-request-id")[0] != "42" || g.Get("traceparent")[0] != "00-ab-cd-01" {
					t.Errorf("upstream metadata %v, want the caller's", g)
				}
				if st := h.stats(); st.Batches != 1 || st.InFlight != 0 {
					t.Errorf("stats %+v, want one batch counted and the slot free", st)
				}
			})
		})
	}
}

// TestLateRequestsYield: requests whose wait already used up the SLO go
// after the fresh ones, so one slow execution does not make every request
// behind it late too; they are still sent, oldest first, and counted. A
// late request that would expire before another batch goes first.
func TestLateRequestsYield(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 3, SLO: 50 * time.Millisecond})
		h.up.latency = func(n int) time.Duration { return 5 * time.Millisecond }
		for i := range 5 { // teach the latency fit
			if _, err := h.do(t.Context(), fmt.Sprintf("a 1 w%d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		release := h.up.hold()
		busy := h.goDo(t.Context(), "a 1 busy", nil) // a slow execution holds the slot
		synctest.Wait()
		var outs []<-chan outcome
		for _, id := range []string{"o0", "o1", "o2"} {
			ctx := t.Context()
			if id == "o2" {
				// Its deadline comes before a second batch could answer.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 112*time.Millisecond)
				defer cancel()
			}
			outs = append(outs, h.goDo(ctx, "a 1 "+id, nil))
			synctest.Wait()
		}
		time.Sleep(100 * time.Millisecond) // o0..o2 can no longer meet the SLO
		for _, id := range []string{"f0", "f1"} {
			outs = append(outs, h.goDo(t.Context(), "a 1 "+id, nil))
			synctest.Wait()
		}
		release()
		<-busy
		for i, ch := range outs {
			if o := <-ch; o.err != nil {
				t.Fatalf("call %d: %v", i, o.err)
			}
		}
		var reqs []string
		for _, c := range h.up.received()[6:] {
			reqs = append(reqs, c.req)
		}
		// A batch holds 3 rows: o2, urgent, then f0 and f1; then the other
		// late ones, oldest first.
		if want := []string{"batch o2,f0,f1", "batch o0,o1"}; !slices.Equal(reqs, want) {
			t.Errorf("upstream got %q, want %q", reqs, want)
		}
		if st := h.stats(); st.Late != 3 {
			t.Errorf("late = %d, want 3", st.Late)
		}
	})
}

// load sends Poisson arrivals at rate per second for d, each checked for
// its own response, and returns the mean batch size seen by the callers.
func load(t *testing.T, h *harness, rate float64, d time.Duration, seed uint64) float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var outs []<-chan outcome
	for end := time.Now().Add(d); time.Now().Before(end); {
		outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 s%dn%d", seed, len(outs)), nil))
		time.Sleep(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
	}
	sum := 0
	for i, ch := range outs {
		o := <-ch
		if want := fmt.Sprintf("resp s%dn%d", seed, i); o.err != nil || string(o.res.Payload) != want {
			t.Fatalf("call %d: %q %v, want %q", i, o.res.Payload, o.err, want)
		}
		sum += o.res.BatchSize
	}
	return float64(sum) / float64(len(outs))
}

// TestAdaptiveGrowsUnderLoad: at a rate one execution slot cannot serve
// unbatched, batches grow until it can, and every caller gets its own
// answer.
func TestAdaptiveGrowsUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 64})
		h.up.latency = func(n int) time.Duration { return 5*time.Millisecond + time.Duration(n)*250*time.Microsecond }
		// 1000/s against 5.25 ms per unbatched call: 5x over capacity.
		if mean := load(t, h, 1000, time.Second, 1); mean < 4 {
			t.Errorf("mean batch size %.1f under 5x overload, want >= 4", mean)
		}
		if st := h.stats(); st.QueueLength != 0 || st.LatencyBSeconds <= 0 {
			t.Errorf("after the load: %+v, want an empty queue and a fitted per-row cost", st)
		}
	})
}

// TestAdaptiveShrinksWhenBackendSlows: when the per-row cost rises, the
// target size falls so that a batch stays within the SLO.
func TestAdaptiveShrinksWhenBackendSlows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 64, SLO: 50 * time.Millisecond})
		perRow := 250 * time.Microsecond
		h.up.latency = func(n int) time.Duration {
			h.up.mu.Lock() // read under the lock the test writes it with
			defer h.up.mu.Unlock()
			return 5*time.Millisecond + time.Duration(n)*perRow
		}
		load(t, h, 500, time.Second, 1)
		fast := h.stats()
		h.up.mu.Lock()
		perRow = time.Millisecond
		h.up.mu.Unlock()
		load(t, h, 500, time.Second, 2)
		time.Sleep(time.Millisecond)
		h.do(t.Context(), "a 1 probe", nil) // recompute the target
		slow := h.stats()
		if slow.TargetSize >= fast.TargetSize || slow.LatencyBSeconds <= fast.LatencyBSeconds {
			t.Fatalf("target %d (b=%.2gs) -> %d (b=%.2gs): want a smaller target after the slowdown",
				fast.TargetSize, fast.LatencyBSeconds, slow.TargetSize, slow.LatencyBSeconds)
		}
		// The budget: (1 + 1/slots)·L(n) <= 0.8·SLO, L(n) = 5ms + 1ms·n -> n <= 15.
		if slow.TargetSize > 16 {
			t.Errorf("target %d after the slowdown, want <= 16 (fit a=%.3gs b=%.3gs)", slow.TargetSize, slow.LatencyASeconds, slow.LatencyBSeconds)
		}
	})
}

// TestAdaptiveCallLargerThanTarget: when the controller's target falls to
// one row (a per-batch cost over the SLO's budget), a two-row call still
// goes, alone, and the calls behind it follow. It used to make the
// dispatcher recurse until the stack overflowed and the proxy died.
func TestAdaptiveCallLargerThanTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 8, SLO: 50 * time.Millisecond})
		h.up.latency = func(int) time.Duration { return 30 * time.Millisecond }
		load(t, h, 20, time.Second, 1)
		time.Sleep(time.Millisecond)
		h.do(t.Context(), "a 1 probe", nil) // recompute the target
		if st := h.stats(); st.TargetSize != 1 {
			t.Fatalf("target %d, want 1 with 30 ms per batch against a 50 ms SLO", st.TargetSize)
		}
		big, small := h.goDo(t.Context(), "a 2 big", nil), h.goDo(t.Context(), "a 1 small", nil)
		for name, ch := range map[string]<-chan outcome{"big": big, "small": small} {
			if o := <-ch; o.err != nil || string(o.res.Payload) != "resp "+name {
				t.Errorf("%s: %q, %v", name, o.res.Payload, o.err)
			}
		}
	})
}

// TestAdaptiveSeveralSlots: with Slots 4, four batches are in flight at once
// before anything waits.
func TestAdaptiveSeveralSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, Slots: 4})
		release := h.up.hold()
		var outs []<-chan outcome
		for i := range 10 {
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), nil))
			synctest.Wait()
		}
		if st := h.stats(); st.InFlight != 4 || st.QueueLength != 6 {
			t.Fatalf("in flight %d, queued %d; want 4 and 6", st.InFlight, st.QueueLength)
		}
		if n := len(h.up.received()); n != 4 {
			t.Fatalf("%d upstream calls, want 4", n)
		}
		release()
		for _, ch := range outs {
			if o := <-ch; o.err != nil {
				t.Fatal(o.err)
			}
		}
		// The six that waited went as one batch when the first slot freed.
		if got := h.up.received(); len(got) != 5 || got[4].req != "batch r4,r5,r6,r7,r8,r9" {
			t.Errorf("upstream calls %+v, want 4 singles then one batch of 6", got)
		}
	})
}

// TestSlotsPerReplica: a model held by three replicas of a pool runs its
// one slot on each, three batches in flight at once; when one replica
// goes, two, read within a second.
func TestSlotsPerReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var replicas atomic.Int32
		replicas.Store(3)
		h := newHarness(t, Policy{Mode: Adaptive, Slots: 1}, WithReplicas(func(upstream, model string) int {
			if upstream != "up" || model != "m" {
				t.Errorf("replicas asked of %s/%s", upstream, model)
			}
			return int(replicas.Load())
		}))
		release := h.up.hold()
		var outs []<-chan outcome
		for i := range 10 {
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), nil))
			synctest.Wait()
		}
		if st := h.stats(); st.InFlight != 3 || st.Slots != 3 {
			t.Fatalf("in flight %d of %d slots, want 3 of 3", st.InFlight, st.Slots)
		}
		release()
		for _, ch := range outs {
			<-ch
		}
		replicas.Store(2)
		time.Sleep(2 * replicasEvery)
		release = h.up.hold()
		outs = outs[:0]
		for i := range 10 {
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 s%d", i), nil))
			synctest.Wait()
		}
		if st := h.stats(); st.InFlight != 2 {
			t.Errorf("one replica gone: in flight %d, want 2", st.InFlight)
		}
		release()
		for _, ch := range outs {
			<-ch
		}
	})
}

// TestAdaptiveTarget checks the controller's arithmetic on fixed fits.
func TestAdaptiveTarget(t *testing.T) {
	fit := func(a, b time.Duration) *latencyFit {
		return &latencyFit{s0: 10, a: a.Seconds(), b: b.Seconds()}
	}
	ms := time.Millisecond
	cases := []struct {
		name  string
		f     *latencyFit
		rate  float64
		slots int
		want  int
	}{
		{"no data yet: max size", &latencyFit{}, 0, 1, 64},
		// 2·(5 + 0.25n) <= 40 -> n <= 60
		{"resnet-like idle", fit(5*ms, ms/4), 0, 1, 60},
		// 2·(5 + n) <= 40 -> n <= 15
		{"slow per row", fit(5*ms, ms), 0, 1, 15},
		// 1.25·(5 + n) <= 40 -> n <= 27
		{"four slots allow more", fit(5*ms, ms), 0, 4, 27},
		// the SLO allows 30; 1.25·800/s needs only n >= 1000·0.005/(1 - 1000·0.0005) = 10
		{"stable below slo", fit(5*ms, ms/2), 800, 1, 30},
		// 1.25·700/s: n >= 875·0.005/(1 - 875·0.001) = 35 > the SLO's 15
		{"load forces larger batches", fit(5*ms, ms), 700, 1, 35},
		{"overload: max size", fit(5*ms, ms), 5000, 1, 64},
		{"per-batch cost over budget: 1", fit(30*ms, 0), 0, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := adaptiveTarget(tc.f, tc.rate, 50*ms, tc.slots, 64); got != tc.want {
				t.Errorf("target %d, want %d", got, tc.want)
			}
		})
	}
}

// TestLatencyFit: the fit recovers a + b·n from varied batches and ignores a
// rare long-tail execution.
func TestLatencyFit(t *testing.T) {
	var f latencyFit
	for i := range 200 {
		n := 1 + i%16
		d := 5*time.Millisecond + time.Duration(n)*250*time.Microsecond
		if i == 150 {
			d *= 8 // a long-tail execution
		}
		f.add(n, d)
	}
	if a := f.a * 1e3; a < 4.5 || a > 5.5 {
		t.Errorf("a = %.3f ms, want about 5", a)
	}
	if b := f.b * 1e3; b < 0.2 || b > 0.3 {
		t.Errorf("b = %.3f ms/row, want about 0.25", b)
	}
}

// TestHopelessCallNotSent: a queued call whose deadline comes before a
// batch could answer it (the fitted latency) is answered DEADLINE_EXCEEDED
// when its batch forms and never sent: under overload such calls took the
// model's time for answers nobody read (with a 1.35x overload of mixed-row
// calls, clients got 45% of what the model computed; 2.3x more calls
// succeeded once they were not sent).
func TestHopelessCallNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, MaxSize: 8, SLO: 200 * time.Millisecond})
		h.up.latency = func(int) time.Duration { return 30 * time.Millisecond }
		load(t, h, 20, time.Second, 1) // teach the fit: 30 ms a batch
		time.Sleep(time.Second)
		start := time.Now()
		busy := h.goDo(t.Context(), "a 1 busy", nil) // the slot until +30 ms
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 40*time.Millisecond)
		defer cancel()
		doomed := h.goDo(ctx, "a 1 doomed", nil) // its batch could answer at +60 ms
		fine := h.goDo(t.Context(), "a 1 fine", nil)
		o := <-doomed
		if !errors.Is(o.err, context.DeadlineExceeded) || time.Since(start) != 30*time.Millisecond {
			t.Errorf("call with 40 ms for a 30 ms batch behind 30 ms: %v after %v, want DEADLINE_EXCEEDED when its batch formed (30 ms)", o.err, time.Since(start))
		}
		for _, ch := range []<-chan outcome{busy, fine} {
			if o := <-ch; o.err != nil {
				t.Fatal(o.err)
			}
		}
		for _, c := range h.up.received() {
			if strings.Contains(c.req, "doomed") {
				t.Errorf("the upstream got %q", c.req)
			}
		}
	})
}
