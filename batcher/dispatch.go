package batcher

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher/merge"
)

// batch is a set of calls sent as one upstream call.
type batch struct {
	q          *queue
	calls      []*call
	rows       int
	dispatched time.Time
	ctx        context.Context
	cancel     context.CancelFunc
	live       atomic.Int32 // callers still waiting
	info       *Batch       // what the Invoker and the callers see of it
}

// newBatch builds the batch of calls. Its context is detached from every
// caller's: it carries the latest of their deadlines (none if any has
// none) and is cancelled once every caller has left.
func newBatch(q *queue, calls []*call, rows int, now time.Time) *batch {
	bt := &batch{q: q, calls: calls, rows: rows, dispatched: now}
	var latest time.Time
	for _, c := range calls {
		if c.deadline.IsZero() {
			latest = time.Time{}
			break
		}
		if c.deadline.After(latest) {
			latest = c.deadline
		}
	}
	if latest.IsZero() {
		bt.ctx, bt.cancel = context.WithCancel(context.Background())
	} else {
		bt.ctx, bt.cancel = context.WithDeadline(context.Background(), latest)
	}
	bt.live.Store(int32(len(calls)))
	bt.describe()
	return bt
}

// leave is called by a caller that gave up after its batch was sent; the
// last one to leave cancels the upstream call.
func (bt *batch) leave() {
	if bt.live.Add(-1) == 0 {
		bt.cancel()
	}
}

// send makes the batch's upstream call and answers each caller. It runs on
// its own goroutine, without the queue's lock. A batch of one call goes as
// the caller sent it, without merge and split.
func (q *queue) send(bt *batch) {
	defer q.b.wg.Done()
	defer bt.cancel()
	// slotFreed: the batch's execution slot went back (q.call frees it
	// whatever happens inside); a panic before that must free it too.
	slotFreed := false
	defer q.recoverBatch(bt, &slotFreed)
	if len(bt.calls) == 1 {
		c := bt.calls[0]
		slotFreed = true
		resp, header, trailer, took, err := q.call(bt.ctx, bt.dispatched, bt.rows, c.payload, c.md)
		c.done <- delivery{Result: Result{Payload: resp, Header: header, Trailer: trailer, Upstream: took, BatchSize: bt.rows,
			Batch: bt.info}, err: err, dispatched: bt.dispatched}
		return
	}
	items := make([]*merge.Item, len(bt.calls))
	for i, c := range bt.calls {
		items[i] = c.item
	}
	req, err := q.codec.Merge(items)
	if err != nil {
		// The codec promised these were compatible; send them alone rather
		// than fail callers for the batcher's own mistake.
		q.finish(bt.dispatched, bt.rows, 0, false)
		slotFreed = true
		q.sendEach(bt)
		return
	}
	slotFreed = true
	resp, header, trailer, took, err := q.call(bt.ctx, bt.dispatched, bt.rows, req, commonMetadata(bt.calls))
	if err != nil {
		if len(bt.calls) > 1 && !q.m.once && (q.pol.RetryUnbatched || status.Code(err) == codes.InvalidArgument) {
			q.sendEach(bt)
			return
		}
		for _, c := range bt.calls {
			c.done <- delivery{Result: Result{Header: header, Trailer: trailer, Upstream: took, BatchSize: bt.rows,
				Batch: bt.info}, err: err, dispatched: bt.dispatched}
		}
		return
	}
	parts, err := q.codec.Split(resp, items)
	if err == nil && len(parts) != len(bt.calls) {
		err = merge.ErrSplit
	}
	if err != nil && q.m.once {
		// The upstream ran the batch: asking again would run each call
		// twice, which a model that is not idempotent must never see.
		err = fmt.Errorf("batcher: model %s is not idempotent, so its batch is not sent again call by call: %w", q.key.model, err)
		for _, c := range bt.calls {
			c.done <- delivery{Result: Result{Header: header, Trailer: trailer, Upstream: took, BatchSize: bt.rows,
				Batch: bt.info}, err: err, dispatched: bt.dispatched}
		}
		return
	}
	if err != nil {
		// The upstream answered, but not in a shape the batch can be cut
		// by: ask again request by request, so that every caller gets the
		// server's own answer (one wasted execution) rather than ours.
		q.sendEach(bt)
		return
	}
	for i, c := range bt.calls {
		c.done <- delivery{Result: Result{Payload: parts[i], Header: header, Trailer: trailer, Upstream: took, BatchSize: bt.rows,
			Batch: bt.info}, dispatched: bt.dispatched}
	}
}

// sendEach sends every call of bt that still has a caller on its own, with
// the caller's context and metadata, and answers it.
func (q *queue) sendEach(bt *batch) {
	var wg sync.WaitGroup
	for _, c := range bt.calls {
		if c.ctx.Err() != nil {
			c.done <- delivery{err: contextError(c.ctx.Err(), q.key.model, true), dispatched: bt.dispatched}
			continue
		}
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					answer(c, delivery{err: q.panicked(v, "sending a request alone"), dispatched: bt.dispatched})
				}
			}()
			t0 := time.Now()
			resp, header, trailer, err := q.invoke(c.ctx, q.key.method, c.payload, c.md)
			c.done <- delivery{Result: Result{Payload: resp, Header: header, Trailer: trailer,
				Upstream: max(time.Since(t0), 0), BatchSize: c.item.Rows}, err: err, dispatched: bt.dispatched}
		})
	}
	wg.Wait()
}

// call makes the upstream call of a batch of rows rows, sent at sent,
// that holds one slot, and frees the slot, teaching the latency fit, when
// it returns.
func (q *queue) call(ctx context.Context, sent time.Time, rows int, req []byte, md metadata.MD) (resp []byte, header, trailer metadata.MD, took time.Duration, err error) {
	t0 := time.Now()
	ok := false
	// Deferred so that a panic in the upstream call frees the slot too.
	defer func() { q.finish(sent, rows, took, ok) }()
	resp, header, trailer, err = q.invoke(ctx, q.key.method, req, md)
	took = max(time.Since(t0), 0)
	ok = err == nil
	return resp, header, trailer, took, err
}

// sendAlone sends c, which enqueue took as a batch of its own, from the
// caller's goroutine with the caller's context and metadata.
func (q *queue) sendAlone(c *call) (res Result, err error) {
	defer q.b.wg.Done()
	defer func() {
		if v := recover(); v != nil {
			res, err = Result{}, q.panicked(v, "sending a lone request")
		}
	}()
	ctx := c.ctx
	if q.pol.Mode == Adaptive && q.pol.Shed {
		// No caller waits past the SLO (see expire), alone or not.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.arrived.Add(q.pol.SLO))
		defer cancel()
	}
	t0 := time.Now()
	resp, header, trailer, took, err := q.call(ctx, c.arrived, c.item.Rows, c.payload, c.md)
	switch {
	case err == nil:
	case c.ctx.Err() != nil:
		err = contextError(c.ctx.Err(), q.key.model, true)
	case ctx.Err() != nil:
		q.m.rejected[reasonSLO].Add(1)
		err = fmt.Errorf("%w: model %s: no answer within its SLO of %s (sent alone)", ErrShed, q.key.model, q.pol.SLO)
	}
	return Result{
		Payload: resp, Header: header, Trailer: trailer,
		Queue: max(t0.Sub(c.arrived), 0), Upstream: took, BatchSize: c.item.Rows,
	}, err
}

// commonMetadata returns the metadata of the merged call: the keys whose
// values are the same in every call of the batch.
func commonMetadata(calls []*call) metadata.MD {
	first := calls[0].md
	if len(calls) == 1 || len(first) == 0 {
		return first
	}
	md := make(metadata.MD, len(first))
next:
	for k, v := range first {
		for _, c := range calls[1:] {
			if !slices.Equal(c.md[k], v) {
				continue next
			}
		}
		md[k] = v
	}
	return md
}
