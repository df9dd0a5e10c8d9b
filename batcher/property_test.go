package batcher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// TestEveryCallAnsweredAnyShape drives random policies with random traffic
// (row counts up to past MaxSize, two compatibility keys, deadlines,
// cancellations, bursts) and wants every call to end with its own answer,
// ErrNotBatched (the caller sends it alone), a full queue, a cancellation
// only when its context ended, or DEADLINE_EXCEEDED only when it has a
// deadline; and the queue empty afterwards.
// A call whose rows no batch size fitted once made the dispatcher recurse
// until the stack overflowed, which killed the proxy: unit tests with one
// row per call never saw it.
func TestEveryCallAnsweredAnyShape(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { everyCallAnswered(t, seed) })
		})
	}
}

func everyCallAnswered(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	pol := Policy{MaxSize: 1 + rng.IntN(12), Slots: 1 + rng.IntN(3), QueueSize: 4 + rng.IntN(60)}
	if rng.IntN(2) == 0 {
		pol.Mode, pol.SLO = Adaptive, time.Duration(5+rng.IntN(60))*time.Millisecond
	} else {
		pol.Mode, pol.MaxDelay = Static, time.Duration(rng.IntN(20))*time.Millisecond
		for s := 1; s <= pol.MaxSize; s++ {
			if rng.IntN(3) == 0 {
				pol.PreferredSizes = append(pol.PreferredSizes, s)
			}
		}
	}
	h := newHarness(t, pol)
	perCall := time.Duration(rng.IntN(4000)) * time.Microsecond
	fixed := time.Duration(1+rng.IntN(40)) * time.Millisecond
	h.up.latency = func(n int) time.Duration { return fixed + time.Duration(n)*perCall }

	type sent struct {
		id  string
		ctx context.Context
		out <-chan outcome
	}
	var calls []sent
	for i := range 300 {
		ctx, cancel := context.WithCancel(t.Context())
		switch rng.IntN(5) {
		case 0:
			ctx, cancel = context.WithTimeout(t.Context(), time.Duration(rng.IntN(100))*time.Millisecond)
		case 1:
			time.AfterFunc(time.Duration(rng.IntN(50))*time.Millisecond, cancel)
		}
		t.Cleanup(cancel)
		id := fmt.Sprint("r", i)
		key := "ab"[rng.IntN(2):][:1]
		rows := 1 + rng.IntN(pol.MaxSize+1)
		calls = append(calls, sent{id, ctx, h.goDo(ctx, fmt.Sprintf("%s %d %s", key, rows, id), nil)})
		if rng.IntN(4) == 0 { // bursts, then gaps
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		}
	}
	for _, c := range calls {
		o := <-c.out
		switch {
		case o.err == nil:
			if string(o.res.Payload) != "resp "+c.id {
				t.Errorf("%s got %q", c.id, o.res.Payload)
			}
		case errors.Is(o.err, ErrNotBatched), errors.Is(o.err, ErrQueueFull):
		case errors.Is(o.err, context.Canceled):
			if c.ctx.Err() == nil {
				t.Errorf("%s: %v while its context is live", c.id, o.err)
			}
		case errors.Is(o.err, context.DeadlineExceeded):
			// At its deadline, or before it when no batch could answer
			// in time (the batcher does not send such a call); never
			// for a call without a deadline.
			if _, has := c.ctx.Deadline(); !has {
				t.Errorf("%s: %v for a call without a deadline", c.id, o.err)
			}
		default:
			t.Errorf("%s: %v", c.id, o.err)
		}
	}
	time.Sleep(time.Second) // batches whose callers all gave up still finish
	synctest.Wait()
	if st := h.stats(); st.QueueLength != 0 || st.InFlight != 0 {
		t.Errorf("after every call ended: %d queued, %d in flight (policy %+v)", st.QueueLength, st.InFlight, pol)
	}
}
