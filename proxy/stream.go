package proxy

import (
	"context"
	"errors"
	"io"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/route"
	"github.com/infergate/infergate/proxy/streammeter"
)

// bidiDesc describes every proxied stream: the proxy does not know a
// method's real shape, so it lets both sides stream.
var bidiDesc = grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// stream forwards any call frame by frame with one pump per direction,
// full duplex.
func (p *Proxy) stream(ctx context.Context, up *Upstream, method string, kind wire.TargetKind,
	ss grpc.ServerStream, subtype grpc.CallOption) (o outcome) {
	// The proxy's limits always: a retry may open the stream on another
	// upstream than up.
	opts := p.callOpts
	if subtype != nil {
		opts = append(opts[:len(opts):len(opts)], subtype)
	}
	// Cancelling upCtx aborts the upstream call when the client side fails.
	upCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := new(callStats)
	// With a router, a model's stream is routed like its unary calls: its
	// first frame is read before the upstream stream opens.
	var sr streamRoute
	if p.router != nil && kind != 0 && methods.IsInference(method) && !p.router.Idle(up) {
		var err error
		if sr, err = p.routeStream(ss, up, kind, st); err != nil {
			o.err = err
			o.model, o.version = st.target()
			return o
		}
		up = sr.up
		o.route, o.reason, o.by = sr.route, sr.reason, up
	}
	if p.tracing != nil {
		why := attemptPrimary
		if sr.reason != "" {
			why = sr.reason
		}
		var span trace.Span
		upCtx, span = p.tracing.startClient(upCtx, method, up, why)
		defer func() { p.tracing.endClient(span, o.err, 0, nil) }()
	}
	t0 := p.now()
	// The stream counts as a call in flight on its endpoint for its life
	// (a removed endpoint keeps its connections until it ends).
	h := up.holdEndpoint(t0, "")
	defer func() { h.done(noVerdict(p.now()), 0, false) }()
	cs, err := h.ep.Conn().NewStream(upCtx, &bidiDesc, method, opts...)
	if err != nil && sr.retry != nil {
		if alt, ok := sr.retry(err); ok {
			sr, up = alt, alt.up
			o.route, o.reason, o.by = sr.route, sr.reason, up
			h.done(noVerdict(p.now()), 0, false)
			h = up.holdEndpoint(p.now(), "")
			if cs, err = h.ep.Conn().NewStream(upCtx, &bidiDesc, method, opts...); err == nil {
				sr.mr.Live().Counters.RetriesWon.Add(1)
			}
		}
	}
	if sr.mr != nil && sr.route == monitor.RoutePrimary {
		sr.mr.Live().Counters.Primary.Add(1)
	}
	if err != nil {
		o.upstream = since(p.now, t0)
		o.err = p.upstreamFailed(ctx, up, method, err, false)
		return o
	}
	// A ModelStreamInfer stream is measured per request too.
	var meter *streammeter.Meter
	if method == methods.ModelStreamInfer && p.rec != nil {
		meter = newStreamMeter(p.rec, method, up.Name(), sr.route)
	}
	s2c := p.forwardServerToClient(cs, ss, st, sr.header, meter)
	c2s := p.forwardClientToServer(ss, cs, kind, st, sr, meter)
	for {
		select {
		case err := <-c2s:
			if err == nil {
				// The client has sent everything, or the upstream stopped
				// reading; the upstream's status comes from s2c.
				c2s = nil
				continue
			}
			// The client failed or went away: abort the upstream call,
			// then wait for s2c so that nothing sends on ss after return.
			cancel()
			<-s2c
			o.err = err
		case err := <-s2c:
			ss.SetTrailer(cs.Trailer())
			o.err = p.streamError(ctx, up, method, err, st.gotHeader || len(cs.Trailer()) > 0)
		}
		break
	}
	o.upstream = since(p.now, t0)
	if meter != nil {
		meter.End(o.err == nil)
	}
	o.bytesIn, o.bytesOut = st.bytesIn.Load(), st.bytesOut.Load()
	o.model, o.version = st.target()
	if sr.mr != nil && sr.route == monitor.RouteFallback && o.err == nil {
		// A stream the fallback answered is a degraded response, as a
		// unary call's answer from it is.
		sr.mr.Live().Counters.Degraded.Add(1)
	}
	return o
}

// recoverPump turns a panic in a stream pump into an *internalError for
// its call, reported on ret (the pump had not reported yet: reporting is
// its last step). The handler's recovery does not see the pumps'
// goroutines.
func (p *Proxy) recoverPump(ctx context.Context, ret chan<- error, where string) {
	if v := recover(); v != nil {
		ret <- p.panicked(ctx, v, where)
	}
}

// testHookFrame, when set by a test, runs for every frame the
// client-to-upstream pump forwards.
var testHookFrame func()

// streamError is the error of what forwardServerToClient reported: nil
// when the upstream finished with OK; the proxy's own errors (a pump's
// panic, a failed send to the client) as they are; anything else is the
// upstream's.
func (p *Proxy) streamError(ctx context.Context, up *Upstream, method string, err error, fromUpstream bool) error {
	if err == io.EOF {
		return nil
	}
	var (
		in *internalError
		cl *clientError
	)
	if errors.As(err, &in) || errors.As(err, &cl) {
		return err
	}
	return p.upstreamFailed(ctx, up, method, err, fromUpstream)
}

// forwardClientToServer pumps request frames from the client to the
// upstream. It reports nil when the client half-closed (after passing the
// half-close on) or the upstream stopped taking messages, and otherwise the
// client-side error. The channel is buffered and never closed. A non-nil
// meter learns each request, stamped when it was received, before it is
// sent on, so that no response can come before its request is known.
func (p *Proxy) forwardClientToServer(src grpc.ServerStream, dst grpc.ClientStream, kind wire.TargetKind, st *callStats,
	sr streamRoute, meter *streammeter.Meter) chan error {
	ret := make(chan error, 1)
	go func() {
		defer p.recoverPump(src.Context(), ret, "client-to-upstream stream pump")
		if sr.eof {
			ret <- dst.CloseSend()
			return
		}
		var err error
		for first := true; ; first = false {
			f := new(Frame)
			var at time.Time
			if first && sr.first != nil {
				f, at = sr.first, sr.firstAt // read by routeStream, counted there
			} else if err = src.RecvMsg(f); err != nil {
				if err == io.EOF {
					ret <- dst.CloseSend() // always nil
				} else {
					ret <- &clientError{err}
				}
				return
			} else if meter != nil {
				at = p.now()
			}
			if meter != nil {
				info, serr := scanRequest(f)
				meter.Request(info, serr, at)
			}
			if testHookFrame != nil {
				testHookFrame()
			}
			if !(first && sr.first != nil) {
				st.bytesIn.Add(int64(f.Len()))
				if first {
					st.setTarget(kind, f)
				}
			}
			out := f
			if sr.rewrite != nil {
				if out, err = sr.rewrite(f); err != nil {
					// A frame that does not parse cannot be readdressed:
					// the upstream judges it, as it would the primary.
					out = f
				}
			}
			err = dst.SendMsg(out)
			f.Free()
			if err != nil {
				// io.EOF: the upstream ended the call, and forwardServerToClient
				// gets its status. Other errors abort the call there too.
				ret <- nil
				return
			}
		}
	}()
	return ret
}

// forwardServerToClient pumps the upstream's headers and response frames to
// the client. It reports io.EOF when the upstream finished with OK, the
// upstream's status error, or a failure to send to the client as a
// *clientError. The channel is buffered and never closed. A non-nil meter
// learns each response once it is sent, so that the scan does not delay
// it, stamped just before the send: the stamp lies between the upstream's
// send and the client's receipt, whatever the scheduler does after.
func (p *Proxy) forwardServerToClient(src grpc.ClientStream, dst grpc.ServerStream, st *callStats, extra metadata.MD,
	meter *streammeter.Meter) chan error {
	ret := make(chan error, 1)
	go func() {
		defer p.recoverPump(dst.Context(), ret, "upstream-to-client stream pump")
		// Relay the headers as soon as they arrive, before any message: a
		// bidi client may wait for them before it sends. Header returns nil
		// for a trailers-only response; RecvMsg then gives the status.
		if md, _ := src.Header(); md != nil {
			st.gotHeader = true
			for k, v := range extra {
				md[k] = v
			}
			if err := dst.SendHeader(md); err != nil {
				ret <- &clientError{err}
				return
			}
		}
		for {
			f := new(Frame)
			if err := src.RecvMsg(f); err != nil {
				ret <- err
				return
			}
			st.bytesOut.Add(int64(f.Len()))
			var at time.Time
			if meter != nil {
				at = p.now()
			}
			err := dst.SendMsg(f)
			if err == nil && meter != nil {
				info, serr := scanResponse(f)
				meter.Response(info, serr, at)
			}
			f.Free()
			if err != nil {
				ret <- &clientError{err}
				return
			}
		}
	}()
	return ret
}

// streamRoute is where a routed stream goes.
type streamRoute struct {
	up     *Upstream
	route  string
	reason string      // grpcwire.HeaderRouteReason of a fallback stream
	header metadata.MD // added to the upstream's response header
	first  *Frame      // the first request frame, already read
	// firstAt is when first was received: a metered stream's first
	// request waits from then.
	firstAt time.Time
	eof     bool // the client half-closed before sending a frame
	// rewrite readdresses each request frame to the fallback model; nil
	// when the stream goes to the model the client named.
	rewrite func(*Frame) (*Frame, error)
	// mr is the model's route, nil for a model without one: its
	// counters take the stream once it is open (a retry may still turn
	// a primary stream into a fallback one).
	mr *route.ModelRoute
	// retry, on the primary route of a model with a fallback, is the
	// route to take when the primary stream could not be opened (nothing
	// reached the upstream): false when that is not safe or allowed.
	retry func(openErr error) (streamRoute, bool)
}

// routeStream reads a model stream's first frame and picks its route: the
// primary, or the fallback while a breaker, an alert or the operator holds
// the model there. A stream is long-lived and may carry many requests, so
// once open it is neither hedged nor retried and does not count for
// breakers; only a primary stream that cannot be opened is retried on the
// fallback (streamRoute.retry) and counted as a failure.
func (p *Proxy) routeStream(ss grpc.ServerStream, up *Upstream, kind wire.TargetKind, st *callStats) (streamRoute, error) {
	sr := streamRoute{up: up, route: monitor.RoutePrimary}
	f := new(Frame)
	if err := ss.RecvMsg(f); err != nil {
		if err == io.EOF {
			sr.eof = true
			return sr, nil
		}
		return sr, &clientError{err}
	}
	sr.first, sr.firstAt = f, p.now()
	st.bytesIn.Add(int64(f.Len()))
	st.setTarget(kind, f)
	model, _ := st.target()
	pk := p.router.Pick(up, route.PickInfo{Model: model, Stream: true})
	if pk.Err != nil {
		return sr, pk.Err
	}
	if pk.ModelRoute == nil {
		return sr, nil
	}
	mr := pk.ModelRoute
	sr.up, sr.mr = targetOf(pk.Primary).up, mr
	if pk.Route == monitor.RoutePrimary {
		if pk.HasFallback {
			sr.retry = func(openErr error) (streamRoute, bool) {
				return p.retryStream(sr, mr, pk.Breaker, targetOf(pk.Fallback), kind, openErr)
			}
		}
		return sr, nil
	}
	if mr.FallbackOpen() {
		return sr, &route.BreakerOpenError{Upstream: mr.FallbackBreaker().Name(), Model: model, Fallback: true}
	}
	return fallbackStream(sr, mr, targetOf(pk.Fallback), kind, pk.Reason), nil
}

// fallbackStream readdresses a stream's route to the model's fallback
// target fb (Pick's).
func fallbackStream(sr streamRoute, mr *route.ModelRoute, fb target, kind wire.TargetKind, reason string) streamRoute {
	sr.retry = nil
	sr.up = fb.up
	sr.route, sr.reason = monitor.RouteFallback, reason
	sr.header = metadata.Pairs(grpcwire.HeaderRoute, monitor.RouteFallback, grpcwire.HeaderRouteReason, reason)
	sr.rewrite = func(f *Frame) (*Frame, error) {
		b, err := rewriteTarget(kind, f.Bytes(), fb.model, fb.version)
		if err != nil {
			return nil, err
		}
		return NewFrame(b), nil
	}
	mr.Live().Counters.Fallback.Add(1)
	mr.Live().Counters.FellBack(reason)
	return sr
}

// StreamRecorder is a Recorder that also measures the requests inside
// ModelStreamInfer streams (streammeter.Recorder); *monitor.Registry is
// one. The proxy meters a stream only when its Recorder implements it.
type StreamRecorder = streammeter.Recorder

// newStreamMeter returns the meter of a stream, or nil when rec cannot
// record stream samples.
func newStreamMeter(rec Recorder, method, upstream, route string) *streammeter.Meter {
	sr, ok := rec.(StreamRecorder)
	if !ok {
		return nil
	}
	return streammeter.New(sr, method, upstream, route)
}

// scanRequest reads a request frame's model, version and id.
func scanRequest(f *Frame) (wire.InferRequestInfo, error) {
	if len(f.data) == 1 {
		return wire.ScanInferRequest(f.data[0].ReadOnlyData())
	}
	var buf [64][]byte
	return wire.ScanInferRequestChunks(f.Chunks(buf[:0]))
}

// scanResponse reads a response frame's id and flags.
func scanResponse(f *Frame) (wire.StreamResponseInfo, error) {
	if len(f.data) == 1 {
		return wire.ScanStreamResponse(f.data[0].ReadOnlyData())
	}
	var buf [64][]byte
	return wire.ScanStreamResponseChunks(f.Chunks(buf[:0]))
}
