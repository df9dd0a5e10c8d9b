package batcher

// The caller's side of a queued call: waiting for its batch, leaving when
// its context ends, and the errors it gets then.

import (
	"fmt"
	"slices"
	"time"
)

// wait blocks until c's batch answers or c's context ends.
func (q *queue) wait(c *call) (Result, error) {
	select {
	case r := <-c.done:
		return c.resultOf(r), r.err
	case <-c.ctx.Done():
	}
	q.mu.Lock()
	st, bt := c.state, c.batch
	if st == stateQueued {
		q.removeLocked(c)
		c.state = stateDropped
	}
	q.mu.Unlock()
	if st == stateQueued {
		q.m.rejected[reasonOf(c.ctx.Err())].Add(1)
		q.poke() // a static timer may depend on the call that left
	}
	if bt != nil {
		bt.leave()
	}
	res := Result{Queue: max(time.Since(c.arrived), 0)}
	if bt != nil {
		res.Queue = max(bt.dispatched.Sub(c.arrived), 0)
		res.BatchSize = bt.rows
	}
	return res, contextError(c.ctx.Err(), q.key.model, st == stateDispatched)
}

// resultOf is the caller's Result of what its batch delivered: the
// delivery's, with the queue time to the dispatch (or to the answer, for
// a call never sent).
func (c *call) resultOf(r delivery) Result {
	res := r.Result
	if r.dispatched.IsZero() {
		res.Queue = max(time.Since(c.arrived), 0)
	} else {
		res.Queue = max(r.dispatched.Sub(c.arrived), 0)
	}
	return res
}

// contextError is the error of a call whose context ended: it wraps the
// context's error (context.Canceled or context.DeadlineExceeded) and says
// where the call was.
func contextError(err error, model string, sent bool) error {
	where := "waiting in the batch queue"
	if sent {
		where = "in a batched call"
	}
	return fmt.Errorf("batcher: %s of model %s: %w", where, model, err)
}

// removeLocked takes a queued call out of its sub-queue.
func (q *queue) removeLocked(c *call) {
	s := q.subs[c.key]
	if s == nil {
		return
	}
	for i, x := range s.calls {
		if x == c {
			s.calls = slices.Delete(s.calls, i, i+1) // clears the freed slot
			s.rows -= c.item.Rows
			q.n--
			break
		}
	}
	if len(s.calls) == 0 {
		delete(q.subs, s.key)
	}
}
