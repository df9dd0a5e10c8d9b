package h2relay

import (
	"context"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proxy/h2relay/h2codec"
)

// stream is one client stream and, once sent on, its stream on a
// destination connection.
type stream struct {
	cc *clientConn
	ch *h2codec.Half // the client's side; guarded by cc.c.mu

	mu sync.Mutex
	// fields are the client's request headers, pseudo-headers first.
	fields []hpack.HeaderField
	call   Call
	// path is how its request travels.
	path   requestPath
	pool   *Pool
	dest   *destConn
	dh     *h2codec.Half // the destination's side; guarded by dest.c.mu
	sentAt time.Time     // by the Handler's clock
	// clientEnded: the client sent END_STREAM.
	clientEnded bool
	// timeoutAt is when Call.Timeout passes (real time); zero when the
	// call has none.
	timeoutAt time.Time
	answered  bool // response headers came back
	retried   bool // sent again after the upstream refused it
	bytesOut  int64
	done      bool
	// opened is when its headers arrived (real time); wasted: it
	// answered nobody (limits.go).
	opened time.Time
	wasted bool
	// sized: the request's length prefix was read. budgeted: it holds
	// (or waits for) room in the budget, res.
	sized, budgeted bool
	res             budget.Reservation
	// widenTo is the window a request relayed as it arrives waits for
	// in the budget (res), in order, when the budget had no room for it
	// at once (routeEarly); 0 otherwise. Like a widened window's room,
	// res is held until the stream ends: at the request's END_STREAM its
	// last bytes may still wait in the destination's queue.
	widenTo int64
	// scan reads a big request's target as it arrives; cut: the request
	// is relayed to the pool as it arrives (RouteEarly). Until the pool
	// starts it, what arrives collects in call.Body.
	scan Scanner
	cut  bool
	// need is the request's size from its length prefix; admitted: it
	// asked the budget for it.
	need     int64
	admitted bool
	// declared is content-length + 1 when the request has one; got the
	// DATA bytes that came.
	declared, got int64
	// hdr and loose are the bytes of its header list and of its request
	// held outside the budget, counted against its connection (held);
	// covered: the budget holds its request.
	hdr, loose int64
	covered    bool
	timer      *time.Timer
	// cancel ends a served call's context (Responder).
	cancel context.CancelFunc
}

// requestPath is how a stream's request travels through the relay.
type requestPath uint8

const (
	// pathRelayed: relayed to Local as it arrives (a stream that is not
	// a unary call, or a request too big to hold).
	pathRelayed requestPath = iota
	// pathWhole: a unary call, read whole before it is routed.
	pathWhole
	// pathCut: routed from its first bytes (RouteEarly) and relayed to
	// a pool as it arrives.
	pathCut
	// pathDecided: read whole, then sent to a pool, served, handed to
	// Local or refused.
	pathDecided
)

// requestFields are the header fields sent upstream for a routed call: the
// client's as the header policy passes them (grpcwire.ForwardField), with
// the upstream's :authority and the time left as grpc-timeout.
func (s *stream) requestFields(authority string) []hpack.HeaderField {
	out := make([]hpack.HeaderField, 0, len(s.fields)+1)
	timeout := time.Duration(-1)
	if !s.call.Deadline.IsZero() {
		timeout = max(s.call.Deadline.Sub(time.Now()), time.Microsecond)
	} else if s.call.Timeout > 0 {
		timeout = s.call.Timeout
		s.mu.Lock()
		if !s.timeoutAt.IsZero() {
			timeout = max(time.Until(s.timeoutAt), time.Microsecond)
		}
		s.mu.Unlock()
	}
	for _, f := range s.fields {
		f, ok := grpcwire.ForwardField(f)
		if !ok {
			continue
		}
		if f.Name == ":authority" {
			f.Value = authority
		}
		out = append(out, f)
	}
	if timeout >= 0 {
		out = append(out, hpack.HeaderField{Name: "grpc-timeout", Value: grpcwire.EncodeTimeout(timeout)})
	}
	return out
}
