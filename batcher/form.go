package batcher

// Forming batches: when the policy sends (next, staticDecide, holdLimit)
// and which calls go in a batch, in which order (take).

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// next returns the batch to send now, or nil and when to look again (zero:
// on the next arrival or finished batch). Called with the lock held.
func (q *queue) next(now time.Time) (*batch, time.Time) {
	q.refreshLimit()
	q.refreshSlots(now)
	if q.n == 0 || q.inFlight >= q.slots {
		q.publish()
		return nil, time.Time{}
	}
	if q.pol.Mode == Adaptive {
		q.target = adaptiveTarget(&q.fit, q.rate.at(now), q.pol.SLO, q.slots, q.pol.MaxSize)
	}
	q.publish()
	var (
		best   *sub
		size   int
		wakeAt time.Time
	)
	for _, s := range q.subs {
		var n int
		var at time.Time
		if q.pol.Mode == Adaptive {
			n = min(s.rows, q.target)
		} else {
			n, at = staticDecide(&q.pol, s.rows, s.calls[0].arrived, q.holdLimit(s), now)
		}
		if n == 0 {
			if wakeAt.IsZero() || at.Before(wakeAt) {
				wakeAt = at
			}
			continue
		}
		if best == nil || s.calls[0].arrived.Before(best.calls[0].arrived) {
			best, size = s, n
		}
	}
	if best == nil {
		return nil, wakeAt
	}
	var ord order
	if q.pol.Mode == Adaptive && q.fit.ready() {
		l := q.fit.predict(size)
		ord = order{lateBefore: now.Add(-(q.pol.SLO - l)), urgentBefore: now.Add(2*l + deadlineMargin)}
		if q.pol.Shed {
			ord.shed = true
			ord.lateBefore = q.shedCutoff(best, size, now)
		}
	}
	bt := q.take(best, size, ord, now)
	if bt == nil {
		// Every call take looked at had given up and left the queue, so
		// this ends: each round removes at least one call.
		return q.next(now)
	}
	return bt, time.Time{}
}

// holdLimit is the latest time s may wait: its first deadline minus the
// predicted upstream time of a batch of what is queued and deadlineMargin;
// zero when no call has a deadline.
func (q *queue) holdLimit(s *sub) time.Time {
	var first time.Time
	for _, c := range s.calls {
		if !c.deadline.IsZero() && (first.IsZero() || c.deadline.Before(first)) {
			first = c.deadline
		}
	}
	if first.IsZero() {
		return first
	}
	return first.Add(-q.fit.predict(min(s.rows, q.pol.MaxSize)) - deadlineMargin)
}

// deadlineMargin is kept free before a deadline on top of the predicted
// upstream time, for the proxy's own time and the network.
const deadlineMargin = time.Millisecond

// staticDecide is Triton's rule for a sub-queue holding rows rows whose
// oldest call arrived at oldest: send MaxSize rows when there are that
// many, else the largest preferred size that can be formed, else wait until
// MaxDelay after the oldest arrival (or holdLimit, if earlier) and then send
// what there is. It returns the rows to send, or 0 and when to decide again.
func staticDecide(p *Policy, rows int, oldest, holdLimit, now time.Time) (int, time.Time) {
	if rows >= p.MaxSize {
		return p.MaxSize, time.Time{}
	}
	best := 0
	for _, s := range p.PreferredSizes {
		if s <= rows && s > best {
			best = s
		}
	}
	if best > 0 {
		return best, time.Time{}
	}
	due := oldest.Add(p.MaxDelay)
	if !holdLimit.IsZero() && holdLimit.Before(due) {
		due = holdLimit
	}
	if !now.Before(due) {
		return rows, time.Time{}
	}
	return 0, due
}

// order is the adaptive order of a sub-queue's calls; the zero order is
// FIFO. Calls that arrived before lateBefore can no longer meet the SLO:
// they go after the fresh ones, so that one slow execution does not make
// every request behind it late too. But a late call whose deadline comes
// before urgentBefore would expire before another batch could answer it:
// it goes first, served late rather than not at all.
type order struct {
	lateBefore, urgentBefore time.Time
	// shed: the late calls are answered ErrShed instead (Policy.Shed).
	shed bool
}

// take removes up to size rows of calls from s into a new batch, in ord's
// order (arrival order within each class). Calls whose context has ended
// are dropped on the way. The first live call goes even when it alone has
// more rows than size (a target or preferred size below a caller's rows):
// calls are never split, and a batch that took nothing would leave the
// queue as it was for next to try again forever. Called with the lock
// held; nil only when every call looked at had given up.
func (q *queue) take(s *sub, size int, ord order, now time.Time) *batch {
	fresh := 0
	if !ord.lateBefore.IsZero() {
		fresh = sort.Search(len(s.calls), func(i int) bool { return !s.calls[i].arrived.Before(ord.lateBefore) })
	}
	// A call whose deadline comes before a batch could answer it is not
	// sent: it would spend the model's time on an answer nobody reads.
	// It gets DEADLINE_EXCEEDED now instead of at its deadline.
	var hopeless time.Time
	if q.fit.ready() {
		hopeless = now.Add(q.fit.predict(size))
	}
	calls := make([]*call, 0, min(size, len(s.calls)))
	rows := 0
	// pick takes the calls of cs that want accepts, until the batch is
	// full; false once it is.
	pick := func(cs []*call, want func(*call) bool) bool {
		for _, c := range cs {
			if c.state != stateQueued || !want(c) {
				continue
			}
			if err := c.ctx.Err(); err != nil {
				c.state = stateDropped
				q.m.rejected[reasonOf(err)].Add(1)
				continue // its caller returns on its own context
			}
			if !c.deadline.IsZero() && c.deadline.Before(hopeless) {
				c.state = stateDropped
				q.m.rejected[reasonDeadline].Add(1)
				answer(c, delivery{err: fmt.Errorf("batcher: model %s: %w: %s left, a batch takes %s",
					q.key.model, context.DeadlineExceeded, c.deadline.Sub(now).Round(time.Microsecond),
					hopeless.Sub(now).Round(time.Microsecond))})
				continue
			}
			if rows > 0 && rows+c.item.Rows > size {
				return false
			}
			c.state = stateDispatched
			calls = append(calls, c)
			rows += c.item.Rows
		}
		return true
	}
	all := func(*call) bool { return true }
	urgent := func(c *call) bool { return !c.deadline.IsZero() && c.deadline.Before(ord.urgentBefore) }
	late := s.calls[:fresh]
	if ord.shed {
		for _, c := range late {
			if c.state != stateQueued {
				continue
			}
			c.state = stateDropped
			if err := c.ctx.Err(); err != nil {
				q.m.rejected[reasonOf(err)].Add(1)
				continue // its caller returns on its own context
			}
			q.m.rejected[reasonSLO].Add(1)
			answer(c, delivery{err: shedError(q.key.model, now.Sub(c.arrived), q.fit.predict(size), q.pol.SLO)})
		}
		late = nil
	}
	_ = pick(late, urgent) && pick(s.calls[fresh:], all) && pick(late, all)
	for _, c := range late {
		if c.state == stateDispatched {
			q.stats.late++
		}
	}
	// Keep the calls still queued, in arrival order.
	kept := 0
	for _, c := range s.calls {
		if c.state == stateQueued {
			s.calls[kept] = c
			kept++
		} else {
			s.rows -= c.item.Rows
		}
	}
	q.n -= len(s.calls) - kept
	clear(s.calls[kept:])
	s.calls = s.calls[:kept]
	if kept == 0 {
		delete(q.subs, s.key)
	}
	if len(calls) == 0 {
		return nil
	}
	bt := newBatch(q, calls, rows, now)
	for _, c := range calls {
		c.batch = bt
	}
	q.countBatch(rows, now)
	return bt
}
