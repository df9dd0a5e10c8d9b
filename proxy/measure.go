package proxy

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/wire"
)

// codeClass sorts a status code into the series key's code class.
//
// client_error holds the codes that say the request itself was wrong or
// given up: Canceled, InvalidArgument, NotFound, AlreadyExists,
// PermissionDenied, FailedPrecondition, OutOfRange, Unauthenticated.
// Everything else that is not OK is server_error, ResourceExhausted
// included: model servers use it to shed load (quotas, memory, full
// queues), which an alert on server errors must see; an oversized request
// is the exception, and it is rare and fixed by configuration.
// DeadlineExceeded is a server error when the proxy's upstream timeout or
// the upstream itself ended the call; when the client's own deadline ran
// out it is the client's (callClass).
func codeClass(c codes.Code) string {
	switch c {
	case codes.OK:
		return monitor.CodeClassOK
	case codes.Canceled, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.FailedPrecondition, codes.OutOfRange, codes.Unauthenticated:
		return monitor.CodeClassClientError
	default:
		return monitor.CodeClassServerError
	}
}

// callClass is codeClass for one finished call: a DEADLINE_EXCEEDED is
// the client's (client_error) when the deadline that ran out was the one
// the client sent (ctx is the server side of the call), not the proxy's
// upstream timeout and not one the upstream enforced by itself earlier:
// a client that asks for an answer in 2ms cannot make a healthy model
// page anyone. The clock decides, as for the proxy's own
// deadline: the upstream got the deadline rounded up and may answer a
// hair before the server context's timer fires.
func callClass(ctx context.Context, code codes.Code, err error) string {
	if code == codes.DeadlineExceeded && clientDeadlineRanOut(ctx, err) {
		return monitor.CodeClassClientError
	}
	return codeClass(code)
}

// clientDeadlineRanOut says whether the deadline the client sent on ctx
// had passed when the call ended with err.
func clientDeadlineRanOut(ctx context.Context, err error) bool {
	var pt *proxyTimeoutError
	if errors.As(err, &pt) {
		return false
	}
	dl, ok := ctx.Deadline()
	return ok && (errors.Is(ctx.Err(), context.DeadlineExceeded) || !time.Now().Before(dl))
}

// callStats collects one call's measurements. In a stream the two pumps
// write it while the handler may already be recording, hence the atomics
// and the lock.
type callStats struct {
	bytesIn, bytesOut atomic.Int64
	// gotHeader is set by forwardServerToClient before it reports, and
	// read by the handler after.
	gotHeader bool

	mu             sync.Mutex
	model, version string
}

// setTarget records the model name and version of the first request frame.
func (st *callStats) setTarget(kind wire.TargetKind, f *Frame) {
	model, version := frameTarget(kind, f)
	st.mu.Lock()
	st.model, st.version = model, version
	st.mu.Unlock()
}

// frameTarget reads the model name and version from a request frame. A
// frame that does not parse gives "", "": the upstream, not the proxy,
// judges the bytes.
func frameTarget(kind wire.TargetKind, f *Frame) (model, version string) {
	var err error
	switch {
	case kind == 0:
		return "", ""
	case len(f.data) != 1:
		return chunkedTarget(kind, f)
	case kind == wire.KServeTarget:
		var name, ver []byte
		name, ver, err = wire.ModelInferTargetBytes(f.data[0].ReadOnlyData())
		model, version = names.get(name), names.get(ver)
	default:
		model, version, err = wire.PredictTarget(f.data[0].ReadOnlyData())
	}
	if err != nil {
		return "", ""
	}
	return model, version
}

// chunkedTarget is frameTarget for a frame held in several buffers (a large
// request), read in place.
func chunkedTarget(kind wire.TargetKind, f *Frame) (model, version string) {
	var buf [64][]byte
	chunks := f.Chunks(buf[:0])
	var err error
	if kind == wire.KServeTarget {
		model, version, err = wire.ModelInferTargetChunks(chunks)
	} else {
		model, version, err = wire.PredictTargetChunks(chunks)
	}
	if err != nil {
		return "", ""
	}
	return model, version
}

// target returns what setTarget found.
func (st *callStats) target() (model, version string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.model, st.version
}

// since returns the time from start to now, at least 0.
func since(now func() time.Time, start time.Time) time.Duration {
	return max(now().Sub(start), 0)
}
