package batcher

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// WithLogger sets where the Batcher logs what it must not hide: a panic in
// batching code, with its stack. Nil, the default, discards.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(b *Batcher) { b.log = l })
}

// panicked counts and logs a recovered panic and returns the error the
// calls it touched get: ErrPanic with the panic's value.
func (q *queue) panicked(v any, where string) error {
	q.m.rejected[reasonPanic].Add(1)
	if q.b.log != nil {
		q.b.log.Error("batcher: panic recovered; the calls it touched fail with INTERNAL",
			"model", q.key.model, "where", where, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	}
	return fmt.Errorf("%w: %s of model %s: %v", ErrPanic, where, q.key.model, v)
}

// answer delivers r to c unless c was answered already (a panic half way
// through a batch must not block on a caller that got its result).
func answer(c *call, r delivery) {
	select {
	case c.done <- r:
	default:
	}
}

// recoverBatch turns a panic while sending bt into an ErrPanic answer for
// every caller of bt that has none yet, and frees the batch's slot unless
// it was freed already. Deferred by send.
func (q *queue) recoverBatch(bt *batch, slotFreed *bool) {
	v := recover()
	if v == nil {
		return
	}
	if !*slotFreed {
		q.finish(bt.dispatched, bt.rows, 0, false)
	}
	err := q.panicked(v, "batch dispatch")
	for _, c := range bt.calls {
		answer(c, delivery{err: err, dispatched: bt.dispatched})
	}
}

// nextSafe is next under the lock, with a panic turned into ErrPanic for
// every queued call: the dispatcher goes on with an empty queue.
func (q *queue) nextSafe(now time.Time) (bt *batch, at time.Time) {
	q.mu.Lock()
	defer func() {
		if v := recover(); v != nil {
			q.failQueuedLocked(q.panicked(v, "forming a batch"))
			bt, at = nil, time.Time{}
		}
		q.mu.Unlock()
	}()
	return q.next(now)
}
