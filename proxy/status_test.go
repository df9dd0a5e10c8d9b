package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/batcher/merge"
	"github.com/infergate/infergate/proxy/route"
)

// Every kind of error the call path returns, and the status the client
// sees for it: the status edge's whole table.
func TestStatusOf(t *testing.T) {
	upstream, _ := status.New(codes.Unavailable, "model server overloaded").
		WithDetails(&errdetails.ErrorInfo{Reason: "OVERLOADED"})
	refused := status.Error(codes.Unavailable, "connection refused")
	cases := []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"nil", nil, codes.OK, ""},
		{"io.EOF (a stream the upstream ended with OK)", io.EOF, codes.OK, ""},
		{"upstream's own status", &upstreamError{upstream: "pri", err: upstream.Err(), fromUpstream: true},
			codes.Unavailable, "model server overloaded"},
		{"proxy's client failed", &upstreamError{upstream: "pri", err: refused},
			codes.Unavailable, "infergate: upstream pri: connection refused"},
		{"breaker open, no route", &route.BreakerOpenError{Upstream: "pri"},
			codes.Unavailable, "infergate: upstream pri: circuit breaker open; retry later"},
		{"breaker open, model", &route.BreakerOpenError{Upstream: "pri", Model: "big"},
			codes.Unavailable, "infergate: upstream pri: circuit breaker open for model big; retry later"},
		{"fallback's breaker open", &route.BreakerOpenError{Upstream: "edge", Model: "big", Fallback: true},
			codes.Unavailable, "infergate: model big: fallback upstream edge: circuit breaker open; retry later"},
		{"shed", &route.ShedError{Reason: route.ReasonShedInFlight, Msg: "model big: 8 calls in flight"},
			codes.ResourceExhausted, "infergate: model big: 8 calls in flight"},
		{"rewrite", &rewriteError{model: "small", err: errors.New("truncated")},
			codes.InvalidArgument, "infergate: cannot address the request to model small: truncated"},
		{"proxy timeout", &proxyTimeoutError{timeout: 30 * time.Second},
			codes.DeadlineExceeded, "infergate: the call carried no deadline and the proxy's upstream timeout of 30s passed"},
		{"in-flight cap", &inFlightError{max: 100},
			codes.ResourceExhausted, "infergate: too many calls in flight (100); try again later"},
		{"director, plain error", &directorError{method: "/m/M", err: errors.New("no upstream")},
			codes.Unavailable, "infergate: no route for /m/M: no upstream"},
		{"director, its own status", &directorError{method: "/m/M", err: status.Error(codes.PermissionDenied, "tenant")},
			codes.PermissionDenied, "tenant"},
		{"internal", &internalError{msg: "internal error in the hedge"},
			codes.Internal, "infergate: internal error in the hedge"},
		{"client went away", &clientError{status.Error(codes.Canceled, "context canceled")},
			codes.Canceled, "context canceled"},
		{"client sent nothing", errNoRequest, codes.Internal, "infergate: client sent no request message"},
		{"batcher: an upstream status", upstream.Err(), codes.Unavailable, "model server overloaded"},
		{"batcher: queue full", fmt.Errorf("%w: batch queue of model m holds 2 requests", batcher.ErrQueueFull),
			codes.ResourceExhausted, "infergate: batcher: queue full: batch queue of model m holds 2 requests"},
		{"batcher: closed", fmt.Errorf("%w: shutting down", batcher.ErrClosed),
			codes.Unavailable, "infergate: batcher: closed: shutting down"},
		{"batcher: deadline", fmt.Errorf("batcher: waiting in the batch queue of model m: %w", context.DeadlineExceeded),
			codes.DeadlineExceeded, "infergate: batcher: waiting in the batch queue of model m: context deadline exceeded"},
		{"batcher: cancelled", fmt.Errorf("batcher: in a batched call of model m: %w", context.Canceled),
			codes.Canceled, "infergate: batcher: in a batched call of model m: context canceled"},
		{"batcher: panic", fmt.Errorf("%w: bug", batcher.ErrPanic), codes.Internal, "infergate: batcher: internal error: bug"},
		{"batcher: split", fmt.Errorf("batcher: batch of 2: %w", merge.ErrSplit),
			codes.Internal, "infergate: batcher: batch of 2: response cannot be split"},
	}
	for _, tc := range cases {
		st := status.Convert(statusOf(tc.err))
		if st.Code() != tc.code || st.Message() != tc.msg {
			t.Errorf("%s: got %s %q, want %s %q", tc.name, st.Code(), st.Message(), tc.code, tc.msg)
		}
		if got := codeOf(tc.err); got != tc.code {
			t.Errorf("%s: codeOf %s, want %s", tc.name, got, tc.code)
		}
	}
	// The upstream's details survive, directly and through the batcher.
	for _, err := range []error{upstream.Err(), &upstreamError{upstream: "pri", err: upstream.Err(), fromUpstream: true}} {
		if d := status.Convert(statusOf(err)).Details(); len(d) != 1 {
			t.Errorf("%T: upstream status details lost: %v", err, d)
		}
	}
}
