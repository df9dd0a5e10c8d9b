package batcher

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher/merge"
)

// queueKey identifies a queue: requests with different keys are never
// merged.
type queueKey struct{ upstream, method, model, version string }

// callState is where a call is; its queue's lock guards it.
type callState uint8

const (
	stateQueued     callState = iota // waiting in a sub-queue
	stateDispatched                  // taken into a batch
	stateDropped                     // removed unsent: its caller gave up
)

// call is one caller's request.
type call struct {
	ctx      context.Context
	item     *merge.Item
	payload  []byte
	md       metadata.MD
	key      string // sub-queue: compatibility key plus credentials
	arrived  time.Time
	deadline time.Time // zero: none
	done     chan result

	// Guarded by the queue's lock.
	state callState
	batch *batch
}

// result is what a batch delivers to one call.
type result struct {
	payload         []byte
	header, trailer metadata.MD
	err             error
	dispatched      time.Time // zero: never sent
	upstream        time.Duration
	size            int
}

// sub is the FIFO of one compatibility key.
type sub struct {
	key   string
	calls []*call
	rows  int
}

// queue holds the calls of one (upstream, method, model, version), grouped
// by compatibility key, and the controller's state. One dispatcher
// goroutine (run) forms its batches; each batch is sent from its own
// goroutine.
type queue struct {
	b      *Batcher
	key    queueKey
	m      *model
	pol    Policy
	codec  merge.Codec
	invoke Invoker
	wake   chan struct{} // capacity 1: "look again"

	mu       sync.Mutex
	subs     map[string]*sub
	n        int // calls queued
	inFlight int // batches sent and not finished
	fit      latencyFit
	rate     rateMeter
	target   int           // current target size (rows)
	delay    time.Duration // current target delay
	stats    queueStats
	closed   bool // the dispatcher has stopped
}

// queueStats are a queue's counters, guarded by its lock.
type queueStats struct {
	batches, rows uint64
	late          uint64                 // calls sent behind fresher ones: past their SLO budget
	sizes         [numSizeBuckets]uint64 // batches by size bucket, not cumulative
}

func newQueue(b *Batcher, k queueKey, m *model, codec merge.Codec, inv Invoker) *queue {
	q := &queue{
		b: b, key: k, m: m, pol: m.pol, codec: codec, invoke: inv,
		wake: make(chan struct{}, 1),
		subs: make(map[string]*sub),
	}
	q.target = q.pol.MaxSize
	if q.pol.Mode == Static {
		q.delay = q.pol.MaxDelay
	}
	return q
}

// poke wakes the dispatcher without blocking.
func (q *queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// enqueue adds c, or returns RESOURCE_EXHAUSTED when the queue is full and
// ErrNotBatched when too many keys wait already. It reports alone when c
// was not queued but taken as a batch of its own, at once: the queue was
// empty, a slot free and the policy would send a lone request now. The
// caller then sends it itself (sendAlone), sparing the hand-offs to the
// dispatcher and to a batch goroutine, which cost light traffic latency.
func (q *queue) enqueue(c *call) (alone bool, err error) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false, ErrNotBatched
	}
	if q.n >= q.pol.QueueSize {
		n := q.n
		q.mu.Unlock()
		q.m.rejected[reasonQueueFull].Add(1)
		return false, queueFullError(q.key.model, n)
	}
	q.rate.add(c.arrived)
	if q.n == 0 && q.inFlight < q.pol.Slots && q.sendsAtOnce(c.item.Rows, c.arrived) {
		c.state = stateDispatched
		q.countBatch(c.item.Rows)
		q.b.wg.Add(1) // under the lock and before closed: Close waits for it
		q.mu.Unlock()
		return true, nil
	}
	s := q.subs[c.key]
	if s == nil {
		if len(q.subs) >= maxKeys {
			q.mu.Unlock()
			return false, ErrNotBatched
		}
		s = &sub{key: c.key}
		q.subs[c.key] = s
	}
	s.calls = append(s.calls, c)
	s.rows += c.item.Rows
	q.n++
	q.mu.Unlock()
	q.poke()
	return false, nil
}

// sendsAtOnce reports whether the policy sends rows rows, alone in an empty
// queue, at once: always in adaptive mode, in static mode when no delay is
// configured or rows is a preferred size.
func (q *queue) sendsAtOnce(rows int, now time.Time) bool {
	if q.pol.Mode == Adaptive {
		return true
	}
	n, _ := staticDecide(&q.pol, rows, now, time.Time{}, now)
	return n > 0
}

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

// resultOf turns what a batch delivered into the caller's Result.
func (c *call) resultOf(r result) Result {
	res := Result{
		Payload: r.payload, Header: r.header, Trailer: r.trailer,
		Upstream: r.upstream, BatchSize: r.size,
	}
	if r.dispatched.IsZero() {
		res.Queue = max(time.Since(c.arrived), 0)
	} else {
		res.Queue = max(r.dispatched.Sub(c.arrived), 0)
	}
	return res
}

// contextError is the status of a call whose context ended.
func contextError(err error, model string, sent bool) error {
	code := status.FromContextError(err).Code()
	where := "in the batch queue"
	if sent {
		where = "in a batched call"
	}
	what := "cancelled"
	if code == codes.DeadlineExceeded {
		what = "deadline exceeded"
	}
	return status.Error(code, "infergate: "+what+" "+where+" of model "+model)
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

// run is the dispatcher: it forms a batch whenever the policy says so and
// sleeps otherwise, until an arrival, a finished batch or a timer.
func (q *queue) run() {
	defer q.b.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		q.mu.Lock()
		bt, at := q.next(time.Now())
		q.mu.Unlock()
		if bt != nil {
			q.b.wg.Add(1)
			go q.send(bt)
			continue
		}
		if !at.IsZero() {
			timer.Reset(max(time.Until(at), 0))
		}
		select {
		case <-q.wake:
		case <-timer.C:
		case <-q.b.done:
			timer.Stop()
			q.closeQueued()
			return
		}
		timer.Stop()
	}
}

// closeQueued fails every queued call when the Batcher closes.
func (q *queue) closeQueued() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.subs {
		for _, c := range s.calls {
			c.state = stateDropped
			c.done <- result{err: errClosed}
		}
	}
	q.subs = map[string]*sub{}
	q.n = 0
	q.closed = true
}

// next returns the batch to send now, or nil and when to look again (zero:
// on the next arrival or finished batch). Called with the lock held.
func (q *queue) next(now time.Time) (*batch, time.Time) {
	if q.n == 0 || q.inFlight >= q.pol.Slots {
		return nil, time.Time{}
	}
	if q.pol.Mode == Adaptive {
		q.target = adaptiveTarget(&q.fit, q.rate.at(now), q.pol.SLO, q.pol.Slots, q.pol.MaxSize)
	}
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
	}
	bt := q.take(best, size, ord, now)
	if bt == nil {
		return q.next(now) // every call taken had given up
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
type order struct{ lateBefore, urgentBefore time.Time }

// take removes up to size rows of calls from s into a new batch, in ord's
// order (arrival order within each class). Calls whose context has ended
// are dropped on the way. Called with the lock held; nil when nothing was
// left to send.
func (q *queue) take(s *sub, size int, ord order, now time.Time) *batch {
	fresh := 0
	if !ord.lateBefore.IsZero() {
		fresh = sort.Search(len(s.calls), func(i int) bool { return !s.calls[i].arrived.Before(ord.lateBefore) })
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
			if rows+c.item.Rows > size {
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
	q.countBatch(rows)
	return bt
}

// countBatch counts one batch of rows rows sent and takes a slot. Called
// with the lock held.
func (q *queue) countBatch(rows int) {
	q.inFlight++
	q.stats.batches++
	q.stats.rows += uint64(rows)
	q.stats.sizes[sizeBucket(rows)]++
}

// finish records a sent batch: the slot is free again, and a successful
// batch teaches the latency fit.
func (q *queue) finish(rows int, took time.Duration, ok bool) {
	q.mu.Lock()
	q.inFlight--
	if ok {
		q.fit.add(rows, took)
		if q.pol.Mode == Adaptive {
			q.target = adaptiveTarget(&q.fit, q.rate.at(time.Now()), q.pol.SLO, q.pol.Slots, q.pol.MaxSize)
		}
	}
	q.mu.Unlock()
	q.poke()
}
