package batcher

import (
	"context"
	"sync/atomic"
)

// Batch describes one merged upstream call to the Invoker that sends it and
// to each caller that rode in it, so that what a merged call cannot carry
// per caller (a trace context, a request id) can still be joined up: a
// tracer links the batch's span to each caller's, and each caller's to the
// batch's; a request log names the batch.
type Batch struct {
	// ID is unique among the batches of a process.
	ID uint64
	// Rows is the number of rows merged; Calls the callers' contexts, in
	// merge order (as Do got them).
	Rows  int
	Calls []context.Context
	// Link is set by the Invoker before it returns (for example to the
	// span context of the upstream call) and read by the callers after
	// their Do returned, which happens after: no lock is needed.
	Link any
}

// batchIDs numbers batches across every Batcher of the process.
var batchIDs atomic.Uint64

type batchKey struct{}

// BatchOf returns the batch an Invoker is sending, or nil when it is
// sending one request alone (a request the batcher passed on unmerged).
func BatchOf(ctx context.Context) *Batch {
	b, _ := ctx.Value(batchKey{}).(*Batch)
	return b
}

// describe builds the Batch of bt and puts it in bt's context, for the Invoker.
func (bt *batch) describe() {
	info := &Batch{ID: batchIDs.Add(1), Rows: bt.rows, Calls: make([]context.Context, len(bt.calls))}
	for i, c := range bt.calls {
		info.Calls[i] = c.ctx
	}
	bt.info = info
	bt.ctx = context.WithValue(bt.ctx, batchKey{}, info)
}
