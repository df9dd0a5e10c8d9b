package batcher

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/proto/methods"
)

// doVersion calls Do for one row of model m at version v.
func (h *harness) doVersion(v string) error {
	_, err := h.b.Do(h.t.Context(), Request{
		Upstream: "up", Invoke: h.up.invoke, Method: methods.ModelInfer,
		Model: "m", Version: v, Payload: []byte("a 1 " + v),
	})
	return err
}

// batchesTotal reads infergate_batches_total of model m from the metrics.
func batchesTotal(t *testing.T, b *Batcher) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := b.Register(reg); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() == "infergate_batches_total" {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestIdleQueuesAreFreed: versions a client tried once hold a queue (and
// its dispatcher) only until it has been idle for queueIdle; the batch
// counters stay on /metrics; the version batches again when it returns.
func TestIdleQueuesAreFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		for v := range 3 {
			if err := h.doVersion(fmt.Sprint(v)); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(h.b.Stats()); n != 3 {
			t.Fatalf("%d queues, want 3", n)
		}
		time.Sleep(queueIdle / 2)
		if err := h.doVersion("0"); err != nil { // keeps version 0 alive
			t.Fatal(err)
		}
		time.Sleep(queueIdle/2 + time.Second)
		synctest.Wait()
		if st := h.b.Stats(); len(st) != 1 || st[0].Version != "0" {
			t.Fatalf("queues after versions 1 and 2 idled out: %+v, want version 0's only", st)
		}
		if got := batchesTotal(t, h.b); got != 4 {
			t.Errorf("infergate_batches_total %v after freeing queues, want 4", got)
		}
		time.Sleep(queueIdle + time.Second)
		synctest.Wait()
		if n := len(h.b.Stats()); n != 0 {
			t.Fatalf("%d queues after an idle minute, want 0", n)
		}
		if err := h.doVersion("1"); err != nil {
			t.Fatalf("version 1 back: %v", err)
		}
		if got := batchesTotal(t, h.b); got != 5 {
			t.Errorf("infergate_batches_total %v, want 5", got)
		}
	})
}

// TestQueueCapRecovers: a client that cycles through more versions than
// maxQueues gets the extra ones sent unbatched, but only until the queues
// it left idle are freed; then new versions batch again.
func TestQueueCapRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		for v := range maxQueues {
			if err := h.doVersion(fmt.Sprint("junk", v)); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.doVersion("real"); !errors.Is(err, ErrNotBatched) {
			t.Fatalf("version past the cap: %v, want ErrNotBatched", err)
		}
		time.Sleep(queueIdle + time.Second)
		synctest.Wait()
		if err := h.doVersion("real"); err != nil {
			t.Fatalf("new version after the junk idled out: %v, want it batched", err)
		}
	})
}

// TestCallMeetsRetiringQueue: a call that found its queue just before the
// queue was freed is batched all the same, in a new queue.
func TestCallMeetsRetiringQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Adaptive})
		if err := h.doVersion("1"); err != nil {
			t.Fatal(err)
		}
		var retired []*queue
		testHookQueueFound = func(q *queue) {
			if len(retired) == 0 && h.b.retire(q, time.Now().Add(queueIdle)) {
				retired = append(retired, q)
			}
		}
		defer func() { testHookQueueFound = nil }()
		if err := h.doVersion("1"); err != nil {
			t.Fatalf("call meeting its queue's retirement: %v", err)
		}
		if len(retired) != 1 {
			t.Fatal("the hook retired no queue")
		}
		if st := h.b.Stats(); len(st) != 1 || st[0].Batches != 1 {
			t.Errorf("queues %+v, want a new one with the call's batch", st)
		}
	})
}
