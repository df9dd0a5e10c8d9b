package proxy

import (
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proxy/route"
)

// reply answers the client of a unary call with the attempt result a that
// route chose, marking an answer of another route than the primary in the
// response header, and fills the outcome. It is the one place a unary
// call's answer is written.
func (p *Proxy) reply(ss side, a attemptResult, route, reason string, up *Upstream, o outcome, ctr *route.Counters) outcome {
	if o.rel != nil {
		o.rel.rows = o.feat.Rows
		if b, by, resent := o.rel.settle(a, up); resent {
			o.upstream, o.queue = o.upstream+a.upstream, o.queue+a.queue // the failed candidate's
			a, up = b, by
		}
	}
	o.upstream += a.upstream
	o.queue += a.queue
	o.route, o.reason, o.by = route, reason, up
	if a.batch != nil {
		o.batchID = a.batch.ID
	}
	header := a.header
	if route != monitor.RoutePrimary || o.rel != nil {
		// A batched answer's header is the batch's, read by every caller
		// of it at once (batcher.Result): mark a copy.
		header = header.Copy()
		if route != monitor.RoutePrimary {
			header.Set(grpcwire.HeaderRoute, route)
			if reason != "" {
				header.Set(grpcwire.HeaderRouteReason, reason)
			}
		}
		if o.rel != nil {
			header.Set(grpcwire.HeaderVersion, o.rel.answered)
		}
	}
	// SetHeader and SetTrailer fail only once headers went out, which
	// cannot have happened yet. SetHeader copies the header (three
	// allocations per call); it is skipped when a message follows and the
	// header holds only keys gRPC's server never writes (the upstream's
	// content-type): the message makes gRPC send the same header frame
	// anyway. An error needs it set: a set header is what makes gRPC send
	// a header frame before the trailers, as the upstream did, instead of
	// a trailers-only answer.
	if header != nil && (a.err != nil || !onlyUnwritten(header)) {
		_ = ss.SetHeader(header)
	}
	if len(a.trailer) > 0 {
		ss.SetTrailer(a.trailer)
	}
	if a.err != nil {
		o.err = a.err
		return o
	}
	o.bytesOut = int64(a.resp.Len())
	if o.claim != nil {
		o.claim.Hold(o.bytesOut) // held until the client took it
	}
	if err := ss.SendMsg(a.resp); err != nil {
		o.err = &clientError{err}
	}
	if o.rel != nil && o.rel.choice.Shadow != nil && o.err == nil {
		// The client has its answer: the copy is compared with it,
		// which keeps it from the buffer pool.
		o.rel.rows = o.feat.Rows
		o.rel.shadow(a.resp)
	} else {
		a.resp.Free()
	}
	if ctr != nil && route == monitor.RouteFallback && o.err == nil {
		ctr.Degraded.Add(1)
	}
	return o
}

// onlyUnwritten reports whether gRPC's server would write none of md's
// keys into a header frame: pseudo-headers and content-type, which it
// writes itself (a subset of the keys its transport skips, so the answer
// errs towards setting a header, never towards dropping one).
func onlyUnwritten(md metadata.MD) bool {
	for k := range md {
		if k != "content-type" && !strings.HasPrefix(k, ":") {
			return false
		}
	}
	return true
}
