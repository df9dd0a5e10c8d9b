package batcher

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/proto/methods"
)

// The Invoker of a merged call sees the batch (its callers' contexts, in
// order, and its rows), and what it links there reaches every caller.
func TestBatchOfLinksCallersAndInvoker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Policy{Mode: Static, MaxSize: 3, MaxDelay: time.Hour})
		var seen *Batch
		inner := h.up.invoke
		invoke := func(ctx context.Context, method string, req []byte, md metadata.MD) ([]byte, metadata.MD, metadata.MD, error) {
			if b := BatchOf(ctx); b != nil {
				seen = b
				b.Link = "span of the batch"
			}
			return inner(ctx, method, req, md)
		}
		type tag struct{}
		var outs []<-chan outcome
		for i := range 3 {
			ctx := context.WithValue(t.Context(), tag{}, i)
			ch := make(chan outcome, 1)
			go func() {
				res, err := h.b.Do(ctx, Request{Upstream: "up", Invoke: invoke, Method: methods.ModelInfer,
					Model: "m", Payload: []byte(fmt.Sprintf("a 1 r%d", i))})
				ch <- outcome{res, err}
			}()
			outs = append(outs, ch)
			synctest.Wait() // queue them in order
		}
		for i, ch := range outs {
			o := <-ch
			if o.err != nil || o.res.Batch == nil || o.res.Batch != seen {
				t.Fatalf("call %d: %+v %v, want the invoker's batch", i, o.res, o.err)
			}
			if o.res.Batch.Link != "span of the batch" {
				t.Errorf("call %d: link %v", i, o.res.Batch.Link)
			}
		}
		if seen == nil || seen.Rows != 3 || len(seen.Calls) != 3 || seen.ID == 0 {
			t.Fatalf("invoker saw %+v, want 3 rows and 3 callers", seen)
		}
		for i, c := range seen.Calls {
			if c.Value(tag{}) != i {
				t.Errorf("caller %d's context is %v", i, c.Value(tag{}))
			}
		}
	})
}
