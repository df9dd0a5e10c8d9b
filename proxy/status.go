package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/proxy/route"
)

// The status edge. Inner code (the picker, attempts, the pumps) returns
// the errors below, or the batcher's sentinels, or a status the upstream
// sent; statusOf alone turns any of them into the status the client sees,
// as httputil.ReverseProxy's ErrorHandler is the one place its errors
// become responses. The pipeline (serveCall) returns, and recordCall records,
// what statusOf made of a call's error.

// errNoRequest: the client half-closed a unary call without a message.
var errNoRequest = errors.New("client sent no request message")

// upstreamError is a failed upstream call. A status the upstream sent
// (fromUpstream: it sent headers or trailers) passes unchanged, details
// included; one the proxy's own client made (upstream unreachable,
// connection lost) keeps its code and says which upstream failed.
type upstreamError struct {
	upstream     string
	err          error
	fromUpstream bool
}

func (e *upstreamError) Error() string { return "upstream " + e.upstream + ": " + e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

// rewriteError: the request could not be readdressed to the fallback model.
type rewriteError struct {
	model string
	err   error
}

func (e *rewriteError) Error() string {
	return fmt.Sprintf("cannot address the request to model %s: %v", e.model, e.err)
}

// proxyTimeoutError: the proxy's own deadline for a call without one
// (WithUpstreamTimeout) passed.
type proxyTimeoutError struct{ timeout time.Duration }

func (e *proxyTimeoutError) Error() string {
	return fmt.Sprintf("the call carried no deadline and the proxy's upstream timeout of %s passed", e.timeout)
}

// inFlightError: the proxy's cap on calls in progress refused the call.
type inFlightError struct{ max int64 }

func (e *inFlightError) Error() string {
	return fmt.Sprintf("too many calls in flight (%d); try again later", e.max)
}

// directorError: the Director refused the call. A status error it
// returned passes unchanged.
type directorError struct {
	method string
	err    error
}

func (e *directorError) Error() string { return "no route for " + e.method + ": " + e.err.Error() }
func (e *directorError) Unwrap() error { return e.err }

// internalError: a proxy bug the call cannot survive (no method name, a
// nil upstream, a recovered panic).
type internalError struct{ msg string }

func (e *internalError) Error() string { return e.msg }

// clientError: reading from or writing to the client failed. gRPC has
// already ended the call with that status; it passes as it is, for the
// measurement.
type clientError struct{ err error }

func (e *clientError) Error() string { return "client: " + e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }

// statusOf is the status edge: the one function that turns what the call
// path returned into the client's status (nil for nil).
func statusOf(err error) error {
	if err == nil || err == io.EOF {
		return nil
	}
	var (
		up  *upstreamError
		bo  *route.BreakerOpenError
		sh  *route.ShedError
		rw  *rewriteError
		pt  *proxyTimeoutError
		inf *inFlightError
		bud *budget.Error
		dir *directorError
		in  *internalError
		cl  *clientError
		fe  *flowError
	)
	switch {
	case errors.As(err, &cl):
		return status.Convert(cl.err).Err()
	case errors.As(err, &up):
		if up.fromUpstream {
			return up.err
		}
		s := status.Convert(up.err)
		return status.Error(s.Code(), "infergate: upstream "+up.upstream+": "+s.Message())
	case errors.As(err, &bo):
		return status.Error(codes.Unavailable, "infergate: "+bo.Error())
	case errors.As(err, &sh):
		return status.Error(codes.ResourceExhausted, "infergate: "+sh.Msg)
	case errors.As(err, &fe):
		return status.Error(codes.ResourceExhausted, "infergate: "+fe.Error())
	case errors.As(err, &rw):
		return status.Error(codes.InvalidArgument, "infergate: "+rw.Error())
	case errors.As(err, &pt):
		return status.Error(codes.DeadlineExceeded, "infergate: "+pt.Error())
	case errors.As(err, &inf):
		return status.Error(codes.ResourceExhausted, "infergate: "+inf.Error())
	case errors.As(err, &bud):
		return status.Error(codes.ResourceExhausted, "infergate: "+bud.Error())
	case errors.As(err, &dir):
		if _, ok := status.FromError(dir.err); ok {
			return dir.err
		}
		return status.Error(codes.Unavailable, "infergate: "+dir.Error())
	case errors.As(err, &in):
		return status.Error(codes.Internal, "infergate: "+in.msg)
	case errors.Is(err, errNoRequest):
		return status.Error(codes.Internal, "infergate: "+err.Error())
	}
	if st, ok := status.FromError(err); ok {
		return st.Err() // the upstream's, through the batcher's Invoker
	}
	return batchStatus(err)
}

// codeOf is the code statusOf gives err: what breakers, retries and the
// measurement classify.
func codeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	c := status.Code(statusOf(err))
	if c == codes.Unknown {
		// gRPC's server turns context errors into their codes.
		c = status.FromContextError(err).Code()
	}
	return c
}

// batchStatus gives the batcher's own sentinel errors their codes;
// anything else (batcher.ErrPanic, merge.ErrSplit) is INTERNAL.
func batchStatus(err error) error {
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	code := codes.Internal
	switch {
	case errors.Is(err, batcher.ErrQueueFull):
		code = codes.ResourceExhausted
	case errors.Is(err, batcher.ErrClosed):
		code = codes.Unavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, "infergate: "+err.Error())
}
