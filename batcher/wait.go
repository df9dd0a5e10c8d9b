package batcher

// The caller's side of a queued call: waiting for its batch, leaving when
// its context ends, and the errors it gets then.

import (
	"fmt"
	"slices"
	"time"
)

// wait blocks until c's batch answers or c's context ends, or, when the
// queue sheds, until c's SLO has passed.
func (q *queue) wait(c *call) (Result, error) {
	var expired <-chan time.Time
	if q.pol.Mode == Adaptive && q.pol.Shed {
		t := time.NewTimer(time.Until(c.arrived.Add(q.pol.SLO)))
		defer t.Stop()
		expired = t.C
	}
	select {
	case r := <-c.done:
		return c.resultOf(r), r.err
	case <-c.ctx.Done():
	case <-expired:
		return q.expire(c)
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

// expire gives up on c, whose SLO has passed before an answer came (a
// slow execution ahead of it or of its own batch): with Policy.Shed no
// caller waits past the SLO. It leaves the queue or its batch (the last
// caller to leave cancels the upstream call) and gets ErrShed.
func (q *queue) expire(c *call) (Result, error) {
	q.mu.Lock()
	st, bt := c.state, c.batch
	switch st {
	case stateQueued:
		q.removeLocked(c)
		c.state = stateDropped
	case stateDropped:
		// Answered by the dispatcher (shed, or hopeless) as the timer
		// fired: that answer stands.
		q.mu.Unlock()
		r := <-c.done
		return c.resultOf(r), r.err
	}
	q.mu.Unlock()
	select {
	case r := <-c.done: // the answer came as the timer fired
		return c.resultOf(r), r.err
	default:
	}
	q.m.rejected[reasonSLO].Add(1)
	res := Result{Queue: max(time.Since(c.arrived), 0)}
	where := "in the batch queue"
	if bt != nil {
		bt.leave()
		res.Queue = max(bt.dispatched.Sub(c.arrived), 0)
		res.BatchSize = bt.rows
		where = fmt.Sprintf("in a batch of %d sent %s ago", bt.rows, time.Since(bt.dispatched).Round(time.Microsecond))
	} else {
		q.poke()
	}
	return res, fmt.Errorf("%w: model %s: no answer within its SLO of %s (%s)", ErrShed, q.key.model, q.pol.SLO, where)
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
