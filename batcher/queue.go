package batcher

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"

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
	done     chan delivery

	// Guarded by the queue's lock.
	state callState
	batch *batch
}

// delivery is what a batch hands one call: the caller's Result, but for
// its queue time, which the caller works out from dispatched, and the
// error.
type delivery struct {
	Result
	err        error
	dispatched time.Time // zero: never sent
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
	// running are the batches in flight (len inFlight): when each was
	// sent and its rows, from which the shedding policy predicts when a
	// slot frees.
	running []slotUse
	// slots is how many batches may be in flight: the policy's Slots
	// per replica holding the model (refreshSlots), read at slotsAt.
	slots   int
	slotsAt time.Time
	fit     latencyFit
	rate    rateMeter
	target  int // current target size (rows)
	// capacity is where the queue publishes how many calls it takes at
	// once (publish, Batcher.Capacity).
	capacity   *atomic.Int32
	delay      time.Duration // current target delay
	stats      queueStats
	closed     bool      // the dispatcher has stopped
	retired    bool      // freed for being idle (see Batcher.retire)
	handedOver bool      // retired by Apply: ends once it has sent what it holds
	lastActive time.Time // the last arrival or finished batch
}

// slotUse is one batch in flight: sent at at, with rows rows.
type slotUse struct {
	at   time.Time
	rows int
}

// queueStats are a queue's counters, guarded by its lock.
type queueStats struct {
	batches, rows uint64
	late          uint64                 // calls sent behind fresher ones: past their SLO budget
	sizes         [numSizeBuckets]uint64 // batches by size bucket, not cumulative
}

// add adds o's counts to s.
func (s *queueStats) add(o *queueStats) {
	s.batches += o.batches
	s.rows += o.rows
	s.late += o.late
	for i, n := range o.sizes {
		s.sizes[i] += n
	}
}

func newQueue(b *Batcher, k queueKey, m *model, codec merge.Codec, inv Invoker) *queue {
	q := &queue{
		b: b, key: k, m: m, pol: m.pol, codec: codec, invoke: inv,
		wake: make(chan struct{}, 1),
		subs: make(map[string]*sub),
	}
	q.pol.MaxSize = m.maxRows()
	q.pol.PreferredSizes = capSizes(m.pol.PreferredSizes, q.pol.MaxSize)
	q.target = q.pol.MaxSize
	q.slots = q.pol.Slots
	q.lastActive = time.Now()
	q.refreshSlots(q.lastActive)
	if q.pol.Mode == Static {
		q.delay = q.pol.MaxDelay
	}
	q.capacity = b.capacityOf(k.upstream, k.model)
	q.publish()
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
	if q.retired {
		q.mu.Unlock()
		return false, errRetired
	}
	if q.closed {
		q.mu.Unlock()
		return false, ErrNotBatched
	}
	q.lastActive = c.arrived
	if q.n >= q.pol.QueueSize {
		n := q.n
		q.mu.Unlock()
		q.m.rejected[reasonQueueFull].Add(1)
		return false, queueFullError(q.key.model, n)
	}
	q.rate.add(c.arrived)
	q.refreshSlots(c.arrived)
	if q.n == 0 && q.inFlight < q.slots && q.sendsAtOnce(c.item.Rows, c.arrived) {
		c.state = stateDispatched
		q.countBatch(c.item.Rows, c.arrived)
		q.b.wg.Add(1) // under the lock and before closed: Close waits for it
		q.mu.Unlock()
		return true, nil
	}
	s := q.subs[c.key]
	if s == nil && len(q.subs) >= maxKeys {
		q.mu.Unlock()
		return false, ErrNotBatched
	}
	if err := q.admitLocked(s, c); err != nil {
		q.mu.Unlock()
		q.m.rejected[reasonSLO].Add(1)
		return false, err
	}
	if s == nil {
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

// run is the dispatcher: it forms a batch whenever the policy says so and
// sleeps otherwise, until an arrival, a finished batch or a timer.
func (q *queue) run() {
	defer q.b.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		now := time.Now()
		bt, at := q.nextSafe(now)
		if bt != nil {
			q.b.wg.Add(1)
			go q.send(bt)
			continue
		}
		if at.IsZero() {
			// Nothing to form: look again when the queue would be idle
			// for long enough to be freed.
			idleAt, idle := q.idleAt()
			if idle && !now.Before(idleAt) && q.b.retire(q, now) {
				return
			}
			if idle {
				at = idleAt
			}
		}
		if !at.IsZero() {
			timer.Reset(max(time.Until(at), 0))
		}
		select {
		case <-q.wake:
		case <-timer.C:
		case <-q.b.done:
			timer.Stop()
			q.mu.Lock()
			q.failQueuedLocked(closedError(q.key.model))
			q.closed = true
			q.mu.Unlock()
			return
		}
		timer.Stop()
	}
}

// idleAt is when q, empty and with nothing in flight (idle), may be freed.
func (q *queue) idleAt() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.handedOver {
		return time.Time{}, q.n == 0 && q.inFlight == 0 // nothing new comes: end when empty
	}
	return q.lastActive.Add(queueIdle), q.n == 0 && q.inFlight == 0
}

// failQueuedLocked fails every queued call with err (the Batcher closed,
// or forming a batch panicked). Called with the lock held.
func (q *queue) failQueuedLocked(err error) {
	for _, s := range q.subs {
		for _, c := range s.calls {
			c.state = stateDropped
			answer(c, delivery{err: err})
		}
	}
	q.subs = map[string]*sub{}
	q.n = 0
}

// countBatch counts one batch of rows rows sent at now and takes a slot.
// Called with the lock held.
func (q *queue) countBatch(rows int, now time.Time) {
	q.inFlight++
	q.running = append(q.running, slotUse{at: now, rows: rows})
	q.stats.batches++
	q.stats.rows += uint64(rows)
	q.stats.sizes[sizeBucket(rows)]++
}

// finish records a sent batch, sent at at with rows rows: the slot is
// free again, and a successful batch teaches the latency fit.
func (q *queue) finish(at time.Time, rows int, took time.Duration, ok bool) {
	q.mu.Lock()
	q.inFlight--
	q.release(at, rows)
	q.lastActive = time.Now()
	if ok {
		q.fit.add(rows, took)
		if q.pol.Mode == Adaptive {
			q.target = adaptiveTarget(&q.fit, q.rate.at(time.Now()), q.pol.SLO, q.slots, q.pol.MaxSize)
		}
	}
	q.publish()
	q.mu.Unlock()
	q.poke()
}

// release removes the batch sent at at with rows rows from running (any
// one, should it not be found: the count is what matters most). Called
// with the lock held.
func (q *queue) release(at time.Time, rows int) {
	if len(q.running) == 0 {
		return
	}
	i := slices.IndexFunc(q.running, func(u slotUse) bool { return u.at.Equal(at) && u.rows == rows })
	q.running = slices.Delete(q.running, max(i, 0), max(i, 0)+1)
}
