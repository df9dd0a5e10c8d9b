package proxy

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/batcher/merge"
)

func TestBatchStatus(t *testing.T) {
	upstream, _ := status.New(codes.Unavailable, "model server overloaded").
		WithDetails(&errdetails.ErrorInfo{Reason: "OVERLOADED"})
	cases := []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{upstream.Err(), codes.Unavailable, "model server overloaded"},
		{fmt.Errorf("%w: batch queue of model m holds 2 requests", batcher.ErrQueueFull), codes.ResourceExhausted,
			"infergate: batcher: queue full: batch queue of model m holds 2 requests"},
		{fmt.Errorf("%w: shutting down", batcher.ErrClosed), codes.Unavailable, "infergate: batcher: closed: shutting down"},
		{fmt.Errorf("batcher: waiting in the batch queue of model m: %w", context.DeadlineExceeded), codes.DeadlineExceeded,
			"infergate: batcher: waiting in the batch queue of model m: context deadline exceeded"},
		{fmt.Errorf("batcher: in a batched call of model m: %w", context.Canceled), codes.Canceled,
			"infergate: batcher: in a batched call of model m: context canceled"},
		{fmt.Errorf("%w: bug", batcher.ErrPanic), codes.Internal, "infergate: batcher: internal error: bug"},
		{fmt.Errorf("batcher: batch of 2: %w", merge.ErrSplit), codes.Internal, "infergate: batcher: batch of 2: response cannot be split"},
	}
	for _, tc := range cases {
		st := status.Convert(batchStatus(tc.err))
		if st.Code() != tc.code || st.Message() != tc.msg {
			t.Errorf("%v: got %s %q, want %s %q", tc.err, st.Code(), st.Message(), tc.code, tc.msg)
		}
	}
	// The upstream's details survive.
	if d := status.Convert(batchStatus(upstream.Err())).Details(); len(d) != 1 {
		t.Errorf("upstream status details lost: %v", d)
	}
}
