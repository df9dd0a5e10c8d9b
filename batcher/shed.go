package batcher

// Shedding (adaptive, Policy.Shed): admission control against the SLO.
// Under overload a queue that takes every request makes every request
// late; a server that means its SLO answers the ones it can within it and
// refuses the others at once, so their callers can go elsewhere. Two
// checks do it: at arrival, a request whose predicted answer is past the
// SLO is refused (admitLocked); at dispatch, a queued request whose wait
// has used up the SLO (one slow execution ahead of it) is answered with
// the same error instead of being sent late (take, with order.shed).

import (
	"fmt"
	"slices"
	"time"
)

// sheds reports whether the queue sheds: adaptive, Policy.Shed, and a
// latency fit to predict with.
func (q *queue) sheds() bool {
	return q.pol.Mode == Adaptive && q.pol.Shed && q.fit.ready()
}

// admitLocked returns ErrShed when c, arriving into sub-queue s (nil: its
// key has nothing queued), would be answered later than the SLO, and nil
// otherwise or when the queue does not shed. Called with the lock held,
// for a call that was not sent at once.
func (q *queue) admitLocked(s *sub, c *call) error {
	if !q.sheds() {
		return nil
	}
	done := q.predictDone(s, c.item.Rows, c.arrived)
	wait := done.Sub(c.arrived)
	if wait <= q.pol.SLO {
		return nil
	}
	return fmt.Errorf("%w: model %s would answer in %s, past its SLO of %s (%d requests queued, %d of %d slots busy)",
		ErrShed, q.key.model, wait.Round(time.Microsecond), q.pol.SLO, q.n, q.inFlight, q.slots)
}

// predictDone predicts when a call of rows rows arriving now into s would
// be answered. The batches in flight end at their send time plus the
// fitted latency (now, for one that is already overdue: a slow execution
// may end at any moment, and the dispatch-time check catches what it
// delays); a free slot is free now. The rows queued ahead go in batches
// of the target size, each key's in batches of its own and, across keys,
// roughly in turn, so the call goes in batch k = the batches of the other
// keys plus the full batches of its own key ahead of it. Batch k starts
// when a slot frees for the k-th time: slot (k mod slots) in order of
// freeing, after k/slots further batches on it. Called with the lock held.
func (q *queue) predictDone(s *sub, rows int, now time.Time) time.Time {
	target := max(q.target, 1)
	ahead := 0 // own key's rows ahead
	if s != nil {
		ahead = s.rows
	}
	k := ahead / target
	for _, o := range q.subs {
		if o != s {
			k += (o.rows + target - 1) / target
		}
	}
	own := max(min(ahead+rows-(ahead/target)*target, target), rows) // calls are never split
	slots := max(q.slots, 1)
	idle := max(slots-len(q.running), 0)
	start := now
	if i := k % slots; i >= idle {
		// The (i-idle)-th running batch to end.
		slices.SortFunc(q.running, func(a, b slotUse) int {
			return a.at.Add(q.fit.predict(a.rows)).Compare(b.at.Add(q.fit.predict(b.rows)))
		})
		u := q.running[min(i-idle, len(q.running)-1)]
		if end := u.at.Add(q.fit.predict(u.rows)); end.After(now) {
			start = end
		}
	}
	start = start.Add(time.Duration(k/slots) * q.fit.predict(target))
	return start.Add(q.fit.predict(own))
}

// shedCutoff returns when the oldest call of s that a batch formed now
// can still answer within the SLO arrived; the calls before it are shed.
// The late calls are not sent, so the batch is the fresh ones, up to size
// rows, and a smaller batch answers sooner: the cutoff is the oldest call
// i with age(i) + L(min(rows from i on, size)) <= SLO. Ages fall and
// batches shrink from one call to the next, so the first i that passes is
// the answer. Zero when none passes (every call is late). Called with the
// lock held.
func (q *queue) shedCutoff(s *sub, size int, now time.Time) time.Time {
	rows := s.rows
	for _, c := range s.calls {
		if c.state == stateQueued && now.Sub(c.arrived)+q.fit.predict(min(rows, size)) <= q.pol.SLO {
			return c.arrived
		}
		rows -= c.item.Rows
	}
	return now.Add(time.Nanosecond)
}

// shedError is the error of a queued call shed at dispatch: its wait
// already used up the SLO before a batch could answer it.
func shedError(model string, waited, batch, slo time.Duration) error {
	return fmt.Errorf("%w: model %s: waited %s in the batch queue, a batch takes %s, past its SLO of %s",
		ErrShed, model, waited.Round(time.Microsecond), batch.Round(time.Microsecond), slo)
}
