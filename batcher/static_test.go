package batcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestStaticMaxDelayFlush: requests that never fill a batch are sent
// together MaxDelay after the oldest arrived, not before.
func TestStaticMaxDelayFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Static, MaxSize: 8, MaxDelay: 10 * time.Millisecond})
		t0 := time.Now()
		var outs []<-chan outcome
		for i := range 3 {
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), nil))
			time.Sleep(2 * time.Millisecond)
		}
		for i, ch := range outs {
			o := <-ch
			if o.err != nil || string(o.res.Payload) != fmt.Sprintf("resp r%d", i) {
				t.Fatalf("call %d: %q, %v", i, o.res.Payload, o.err)
			}
			if want := 10*time.Millisecond - time.Duration(i)*2*time.Millisecond; o.res.Queue != want {
				t.Errorf("call %d queued %v, want %v", i, o.res.Queue, want)
			}
		}
		got := h.up.received()
		if len(got) != 1 || got[0].req != "batch r0,r1,r2" || got[0].at.Sub(t0) != 10*time.Millisecond {
			t.Fatalf("upstream got %+v, want one batch of 3 at +10ms", got)
		}
	})
}

// TestStaticMaxSize: a full batch goes at once, however long MaxDelay is.
func TestStaticMaxSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Static, MaxSize: 4, MaxDelay: time.Hour})
		var outs []<-chan outcome
		for i := range 4 {
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), nil))
			synctest.Wait() // queue them in order
		}
		for _, ch := range outs {
			if o := <-ch; o.err != nil || o.res.Queue != 0 || o.res.BatchSize != 4 {
				t.Fatalf("outcome %+v, want a batch of 4 with no wait", o)
			}
		}
	})
}

// TestStaticPreferredSize: a preferred size that can be formed goes at once;
// the rest wait for MaxDelay.
func TestStaticPreferredSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Static, MaxSize: 8, MaxDelay: 5 * time.Millisecond, PreferredSizes: []int{2}, Slots: 2})
		var outs []<-chan outcome
		for i := range 3 {
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), nil))
			synctest.Wait()
		}
		for i, ch := range outs {
			o := <-ch
			wantSize, wantQueue := 2, time.Duration(0)
			if i == 2 {
				wantSize, wantQueue = 1, 5*time.Millisecond
			}
			if o.err != nil || o.res.BatchSize != wantSize || o.res.Queue != wantQueue {
				t.Errorf("call %d: size %d queue %v err %v, want size %d queue %v", i, o.res.BatchSize, o.res.Queue, o.err, wantSize, wantQueue)
			}
		}
	})
}

// TestQueueFull: past QueueSize waiting requests, the next is refused at
// once with RESOURCE_EXHAUSTED and counted.
func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive, QueueSize: 2})
		h.up.gate = make(chan struct{})
		var outs []<-chan outcome
		for i := range 3 { // one in flight, two queued
			outs = append(outs, h.goDo(t.Context(), fmt.Sprintf("a 1 r%d", i), nil))
			synctest.Wait()
		}
		t0 := time.Now()
		_, err := h.do(t.Context(), "a 1 r9", nil)
		if !errors.Is(err, ErrQueueFull) || time.Since(t0) != 0 {
			t.Fatalf("err %v after %v, want RESOURCE_EXHAUSTED at once", err, time.Since(t0))
		}
		if want := "batcher: queue full: batch queue of model m holds 2 requests"; err.Error() != want {
			t.Errorf("message %q, want %q", err.Error(), want)
		}
		if n := (*h.b.models.Load())["m"].rejected[reasonQueueFull].Load(); n != 1 {
			t.Errorf("queue_full rejections = %d, want 1", n)
		}
		close(h.up.gate)
		for _, ch := range outs {
			if o := <-ch; o.err != nil {
				t.Fatal(o.err)
			}
		}
	})
}

// TestDeadlineNotHeld: a static queue sends a request early enough for its
// deadline (deadline minus the predicted upstream time) instead of holding
// it for MaxDelay.
func TestDeadlineNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Static, MaxSize: 8, MaxDelay: time.Hour, PreferredSizes: []int{1}})
		h.up.latency = func(int) time.Duration { return 5 * time.Millisecond }
		for i := range 8 { // teach the fit: sent at once (preferred size 1)
			if _, err := h.do(t.Context(), fmt.Sprintf("a 1 w%d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		h.b.each(func(q *queue) {
			q.mu.Lock()
			q.pol.PreferredSizes = nil
			q.mu.Unlock()
		})

		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		res, err := h.do(ctx, "a 1 d", nil)
		if err != nil {
			t.Fatalf("request with a 50ms deadline: %v (queued %v)", err, res.Queue)
		}
		if want := 44 * time.Millisecond; res.Queue != want {
			t.Errorf("queued %v, want %v (deadline minus the predicted 5ms and the 1ms margin)", res.Queue, want)
		}
	})
}

// TestExpiredNotSent: a request whose deadline passes while every slot is
// busy gets DEADLINE_EXCEEDED and is never sent.
func TestExpiredNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		h.up.gate = make(chan struct{})
		busy := h.goDo(t.Context(), "a 1 busy", nil)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err := h.do(ctx, "a 1 late", nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want DEADLINE_EXCEEDED", err)
		}
		close(h.up.gate)
		if o := <-busy; o.err != nil {
			t.Fatal(o.err)
		}
		synctest.Wait()
		for _, c := range h.up.received() {
			if strings.Contains(c.req, "late") {
				t.Errorf("expired request was sent: %q", c.req)
			}
		}
		if n := (*h.b.models.Load())["m"].rejected[reasonDeadline].Load(); n != 1 {
			t.Errorf("deadline rejections = %d, want 1", n)
		}
		if st := h.stats(); st.QueueLength != 0 {
			t.Errorf("queue length %d, want 0", st.QueueLength)
		}
	})
}

// TestCancelLeavesQueue: a cancelled caller leaves the queue at once and
// its request is not sent.
func TestCancelLeavesQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		h.up.gate = make(chan struct{})
		busy := h.goDo(t.Context(), "a 1 busy", nil)
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		gone := h.goDo(ctx, "a 1 gone", nil)
		stay := h.goDo(t.Context(), "a 1 stay", nil)
		synctest.Wait()
		if st := h.stats(); st.QueueLength != 2 {
			t.Fatalf("queue length %d, want 2", st.QueueLength)
		}
		cancel()
		if o := <-gone; !errors.Is(o.err, context.Canceled) {
			t.Fatalf("cancelled call: %v, want CANCELLED", o.err)
		}
		if st := h.stats(); st.QueueLength != 1 {
			t.Errorf("queue length %d after cancel, want 1", st.QueueLength)
		}
		close(h.up.gate)
		<-busy
		if o := <-stay; o.err != nil || string(o.res.Payload) != "resp stay" {
			t.Fatalf("remaining call: %q %v", o.res.Payload, o.err)
		}
		got := h.up.received()
		if len(got) != 2 || got[1].req != "a 1 stay" {
			t.Errorf("upstream got %+v, want the busy call then \"a 1 stay\" as sent", got)
		}
		if n := (*h.b.models.Load())["m"].rejected[reasonCancelled].Load(); n != 1 {
			t.Errorf("cancelled rejections = %d, want 1", n)
		}
	})
}

// TestCancelAfterDispatch: when every caller of a sent batch has gone, the
// upstream call is cancelled.
func TestCancelAfterDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		h.up.gate = make(chan struct{}) // never opened: only cancellation ends the call
		ctx, cancel := context.WithCancel(t.Context())
		ch := h.goDo(ctx, "a 1 r", nil)
		synctest.Wait()
		cancel()
		if o := <-ch; !errors.Is(o.err, context.Canceled) {
			t.Fatalf("err %v, want CANCELLED", o.err)
		}
		synctest.Wait() // the batch goroutine must have ended: Close would hang otherwise
		if st := h.stats(); st.InFlight != 0 {
			t.Errorf("in flight %d, want 0", st.InFlight)
		}
	})
}

// TestStaticCallLargerThanPreferredSize: a queued call with more rows than
// the preferred size that its rows make formable goes alone, at once. It
// used to make the dispatcher recurse until the stack overflowed and the
// whole proxy died (CI, TestBatchingThroughProxy).
func TestStaticCallLargerThanPreferredSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Static, MaxSize: 8, MaxDelay: time.Hour, PreferredSizes: []int{2}})
		release := h.up.hold()
		first := h.goDo(t.Context(), "a 1 first", nil) // takes the only slot
		synctest.Wait()
		big := h.goDo(t.Context(), "a 3 big", nil) // queues behind it
		synctest.Wait()
		release()
		for name, c := range map[string]struct {
			ch   <-chan outcome
			rows int
		}{"first": {first, 1}, "big": {big, 3}} {
			if o := <-c.ch; o.err != nil || string(o.res.Payload) != "resp "+name || o.res.BatchSize != c.rows {
				t.Errorf("%s: %q in a batch of %d rows, %v; want its own answer, alone", name, o.res.Payload, o.res.BatchSize, o.err)
			}
		}
		if got := h.up.received(); len(got) != 2 {
			t.Errorf("upstream calls %+v, want two singles", got)
		}
	})
}
