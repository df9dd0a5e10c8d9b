package batcher

import (
	"sync/atomic"
)

// Capacity: how many calls of a batched model an upstream takes at once
// without its own queue growing, for flow control in front of the
// batcher. With batching, a server's concurrency is in batches: its
// slots, each running a batch of the size the latency fit says meets the
// SLO (the adaptive target; the largest size in static mode). One more
// batch may form meanwhile. Calls beyond that would wait in the batcher's
// queue in arrival order; flow control holds them back instead and
// decides who goes next.

// capKey names the calls one capacity is for.
type capKey struct{ upstream, model string }

// capacityOf is the published capacity of upstream's queues of model,
// made on first use. Queues of one model on one upstream with several
// methods or versions share it: the last to change it wins.
func (b *Batcher) capacityOf(upstream, model string) *atomic.Int32 {
	k := capKey{upstream, model}
	if c, ok := b.caps.Load(k); ok {
		return c.(*atomic.Int32)
	}
	c, _ := b.caps.LoadOrStore(k, new(atomic.Int32))
	return c.(*atomic.Int32)
}

// Capacity is how many calls of model upstream's batches take at once
// now: (slots + 1) × the target batch size in rows, calls of one row
// each. 0 until the model's first call on upstream made its queue, and
// for a model not batched now: the table of batched models is looked at
// first, a plain map cheaper than the capacities' (flow control asks on
// every call of every model), and a model that a reload stopped batching
// is sent alone from then on, so its old capacity no longer counts.
func (b *Batcher) Capacity(upstream, model string) int {
	if _, ok := (*b.models.Load())[model]; !ok {
		return 0
	}
	if c, ok := b.caps.Load(capKey{upstream, model}); ok {
		return int(c.(*atomic.Int32).Load())
	}
	return 0
}

// publish makes the queue's capacity the one Capacity says; lock held.
func (q *queue) publish() {
	if q.capacity != nil {
		q.capacity.Store(int32((q.slots + 1) * max(q.target, 1)))
	}
}
