package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/monitor"
)

// bidiDesc describes every proxied stream: the proxy does not know a
// method's real shape, so it lets both sides stream.
var bidiDesc = grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// outcome is what a forwarded call reports back to handle.
type outcome struct {
	err               error
	upstream          time.Duration
	queue             time.Duration // in a batch queue (batch.go)
	bytesIn, bytesOut int64
	model, version    string
	// route is the monitor.Route* that answered ("" means primary); upName
	// the upstream that answered when a route chose another than the
	// director's.
	route, upName string
}

// handle is the grpc.StreamHandler for every method: it routes the call,
// forwards it by the unary fast path or the stream path, and measures it.
func (p *Proxy) handle(_ any, ss grpc.ServerStream) error {
	start := p.now()
	ctx := ss.Context()
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "infergate: no method name on the server stream")
	}
	if n := p.calls.Add(1); p.maxInFlight > 0 && n > p.maxInFlight {
		p.calls.Add(-1)
		p.rejected.Add(1)
		err := status.Errorf(codes.ResourceExhausted, "infergate: too many calls in flight (%d); try again later", p.maxInFlight)
		p.finish(ctx, start, method, "", outcome{err: err})
		return err
	}
	defer p.calls.Add(-1)
	up, err := p.director.Direct(ctx, method)
	if err == nil && up == nil {
		err = status.Error(codes.Internal, "infergate: director returned no upstream for "+method)
	}
	if err != nil {
		err = p.directorError(ctx, method, err)
		p.finish(ctx, start, method, "", outcome{err: err})
		return err
	}
	var inFlight *monitor.Gauge
	if p.rec != nil {
		inFlight = p.inFlight(up)
		inFlight.Inc()
	}

	outCtx, subtype := outgoingContext(ctx)
	opts := p.callOpts
	if subtype != "" {
		opts = append(opts[:len(opts):len(opts)], grpc.CallContentSubtype(subtype))
	}
	info := lookupMethod(method)
	var o outcome
	if info.unary {
		// A unary call without a client deadline gets the proxy's.
		var bound time.Time // the proxy's deadline, when it set one
		if _, has := ctx.Deadline(); !has && p.upstreamTimeout > 0 {
			var cancel context.CancelFunc
			outCtx, cancel = context.WithTimeout(outCtx, p.upstreamTimeout)
			defer cancel()
			bound, _ = outCtx.Deadline()
		}
		o = p.unary(outCtx, up, method, info.target, ss, opts)
		// Only when the proxy's own deadline passed: an upstream that
		// answers DEADLINE_EXCEEDED by itself keeps its word. The clock,
		// not outCtx.Err(), says so: the upstream got the deadline as
		// grpc-timeout (rounded up) and may answer before the context's
		// timer fires on a loaded machine.
		if proxyDeadlinePassed(bound, time.Now()) && ctx.Err() == nil &&
			status.Code(o.err) == codes.DeadlineExceeded {
			o.err = status.Errorf(codes.DeadlineExceeded,
				"infergate: the call carried no deadline and the proxy's upstream timeout of %s passed", p.upstreamTimeout)
		}
	} else {
		o = p.stream(outCtx, up, method, info.target, ss, opts)
	}
	upName := up.name
	if o.upName != "" {
		upName = o.upName
	}
	p.finish(ctx, start, method, upName, o)
	if inFlight != nil {
		inFlight.Dec()
	}
	return o.err
}

// unary forwards a call known to carry one message each way with a single
// Invoke, without the two pump goroutines of a stream.
func (p *Proxy) unary(ctx context.Context, up *Upstream, method string, kind targetKind,
	ss grpc.ServerStream, opts []grpc.CallOption) (o outcome) {
	req := new(Frame)
	if err := ss.RecvMsg(req); err != nil {
		if err == io.EOF {
			err = status.Error(codes.Internal, "infergate: client sent no request message for "+method)
		}
		o.err = requestError(err)
		return o
	}
	o.bytesIn = int64(req.Len())
	o.model, o.version = frameTarget(kind, req)
	if p.router != nil && o.model != "" && isInference(method) {
		return p.routeUnary(ctx, up, method, kind, req, ss, opts, o)
	}
	return p.forward(ctx, up, method, kind, req, ss, opts, o)
}

// forward sends a received unary request to up, through the batcher when
// it batches the model, and answers the client.
func (p *Proxy) forward(ctx context.Context, up *Upstream, method string, kind targetKind, req *Frame,
	ss grpc.ServerStream, opts []grpc.CallOption, o outcome) outcome {
	if p.batcher != nil && p.batcher.Handles(method, o.model) {
		if bo, ok := p.batch(ctx, up, method, req, ss, o); ok {
			return bo
		}
	}

	resp := new(Frame)
	header, trailer, took, err := p.invoke(ctx, up, method, req, resp, opts)
	o.upstream = took
	req.Free()
	// SetHeader and SetTrailer fail only once headers went out, which
	// cannot have happened yet.
	if header != nil {
		_ = ss.SetHeader(header)
	}
	if len(trailer) > 0 {
		ss.SetTrailer(trailer)
	}
	if err != nil {
		o.err = err
		return o
	}
	o.bytesOut = int64(resp.Len())
	o.err = ss.SendMsg(resp)
	resp.Free()
	return o
}

// invoke makes one unary upstream call with raw frames: the one upstream
// call of the unary fast path and of the batcher's Invoker. It returns the
// upstream's header and trailer, the call's time, and the error as the
// client should see it (see upstreamError).
func (p *Proxy) invoke(ctx context.Context, up *Upstream, method string, req, resp *Frame,
	opts []grpc.CallOption) (header, trailer metadata.MD, took time.Duration, err error) {
	opts = append(opts[:len(opts):len(opts)], grpc.Header(&header), grpc.Trailer(&trailer))
	t0 := p.now()
	err = up.Conn().Invoke(ctx, method, req, resp, opts...)
	took = since(p.now, t0)
	if err != nil {
		err = p.upstreamError(ctx, up, method, err, header != nil || len(trailer) > 0)
	}
	return header, trailer, took, err
}

// stream forwards any call frame by frame with one pump per direction,
// full duplex.
func (p *Proxy) stream(ctx context.Context, up *Upstream, method string, kind targetKind,
	ss grpc.ServerStream, opts []grpc.CallOption) (o outcome) {
	// Cancelling upCtx aborts the upstream call when the client side fails.
	upCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := new(callStats)
	// With a router, a model's stream is routed like its unary calls: its
	// first frame is read before the upstream stream opens.
	var sr streamRoute
	if p.router != nil && kind != targetNone && isInference(method) {
		var err error
		if sr, err = p.routeStream(ss, up, kind, st); err != nil {
			o.err = err
			o.model, o.version = st.target()
			return o
		}
		up = sr.up
		o.route, o.upName = sr.route, up.name
	}
	t0 := p.now()
	cs, err := up.Conn().NewStream(upCtx, &bidiDesc, method, opts...)
	if err != nil && sr.retry != nil {
		if alt, ok := sr.retry(err); ok {
			sr, up = alt, alt.up
			o.route, o.upName = sr.route, up.name
			if cs, err = up.Conn().NewStream(upCtx, &bidiDesc, method, opts...); err == nil {
				sr.mr.live.counters.retriesWon.Add(1)
			}
		}
	}
	if sr.mr != nil && sr.route == monitor.RoutePrimary {
		sr.mr.live.counters.primary.Add(1)
	}
	if err != nil {
		o.upstream = since(p.now, t0)
		o.err = p.upstreamError(ctx, up, method, err, false)
		return o
	}
	s2c := p.forwardServerToClient(cs, ss, st, sr.header)
	c2s := p.forwardClientToServer(ss, cs, kind, st, sr)
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
			if pp, ok := err.(pumpPanic); ok {
				err = pp.error
			}
			o.err = err
		case err := <-s2c:
			ss.SetTrailer(cs.Trailer())
			o.err = p.streamError(ctx, up, method, err, st.gotHeader || len(cs.Trailer()) > 0)
		}
		break
	}
	o.upstream = since(p.now, t0)
	o.bytesIn, o.bytesOut = st.bytesIn.Load(), st.bytesOut.Load()
	o.model, o.version = st.target()
	if sr.mr != nil && sr.route == monitor.RouteFallback && o.err == nil {
		// A stream the fallback answered is a degraded response, as a
		// unary call's answer from it is.
		sr.mr.live.counters.degraded.Add(1)
	}
	return o
}

// recoverPump turns a panic in a stream pump into an INTERNAL status for
// its call, reported on ret (the pump had not reported yet: reporting is
// its last step). The interceptor does not see the pumps' goroutines.
func (p *Proxy) recoverPump(ctx context.Context, ret chan<- error, where string) {
	if v := recover(); v != nil {
		ret <- pumpPanic{p.panicked(ctx, v, where)}
	}
}

// testHookFrame, when set by a test, runs for every frame the
// client-to-upstream pump forwards.
var testHookFrame func()

// pumpPanic marks the status of a recovered pump panic.
type pumpPanic struct{ error }

// streamError returns the status for what forwardServerToClient reported.
func (p *Proxy) streamError(ctx context.Context, up *Upstream, method string, err error, fromUpstream bool) error {
	if err == io.EOF {
		return nil // the upstream finished with OK
	}
	if pp, ok := err.(pumpPanic); ok {
		return pp.error
	}
	var cse clientSendError
	if errors.As(err, &cse) {
		return status.Convert(cse.err).Err()
	}
	return p.upstreamError(ctx, up, method, err, fromUpstream)
}

// clientSendError marks a failure to send to the client, as opposed to an
// upstream status, in what forwardServerToClient reports.
type clientSendError struct{ err error }

func (e clientSendError) Error() string { return "proxy: send to client: " + e.err.Error() }

func (e clientSendError) Unwrap() error { return e.err }

// forwardClientToServer pumps request frames from the client to the
// upstream. It reports nil when the client half-closed (after passing the
// half-close on) or the upstream stopped taking messages, and otherwise the
// client-side error. The channel is buffered and never closed.
func (p *Proxy) forwardClientToServer(src grpc.ServerStream, dst grpc.ClientStream, kind targetKind, st *callStats,
	sr streamRoute) chan error {
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
			if first && sr.first != nil {
				f = sr.first // read by routeStream, counted there
			} else if err = src.RecvMsg(f); err != nil {
				if err == io.EOF {
					ret <- dst.CloseSend() // always nil
				} else {
					ret <- requestError(err)
				}
				return
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
// upstream's status error, or a failure to send to the client wrapped with
// clientSendError. The channel is buffered and never closed.
func (p *Proxy) forwardServerToClient(src grpc.ClientStream, dst grpc.ServerStream, st *callStats, extra metadata.MD) chan error {
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
				ret <- clientSendError{err}
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
			err := dst.SendMsg(f)
			f.Free()
			if err != nil {
				ret <- clientSendError{err}
				return
			}
		}
	}()
	return ret
}

// requestError returns the status for a failure to read the client's
// request, such as an oversized message. gRPC has already sent that status
// to the client when RecvMsg failed, so it is returned as it is, for the
// measurement.
func requestError(err error) error {
	return status.Convert(err).Err()
}

// upstreamError returns the status for a failed upstream call. A status the
// upstream sent (fromUpstream: it sent headers or trailers) passes
// unchanged, details included. One the proxy's own client made (upstream
// unreachable, connection lost) keeps its code and gets a message that
// says so.
func (p *Proxy) upstreamError(ctx context.Context, up *Upstream, method string, err error, fromUpstream bool) error {
	if fromUpstream {
		return err
	}
	s := status.Convert(err)
	if ctx.Err() == nil {
		p.failures.note(ctx, failureKind{msg: "upstream call failed", upstream: up.name, code: s.Code()},
			slog.String("method", method), slog.String("error", s.Message()))
	}
	return status.Error(s.Code(), "infergate: upstream "+up.name+": "+s.Message())
}

// directorError returns the status for a director's refusal: a status
// error as it is, anything else as UNAVAILABLE.
func (p *Proxy) directorError(ctx context.Context, method string, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	p.failures.note(ctx, failureKind{msg: "no route", code: codes.Unavailable},
		slog.String("method", method), slog.String("error", err.Error()))
	return status.Error(codes.Unavailable, "infergate: no route for "+method+": "+err.Error())
}

// finish records and logs a finished call.
func (p *Proxy) finish(ctx context.Context, start time.Time, method, upstream string, o outcome) {
	if p.rec == nil && p.reqLog == nil {
		return
	}
	code := status.Code(o.err)
	if code == codes.Unknown {
		// gRPC's server turns context errors into their codes.
		code = status.FromContextError(o.err).Code()
	}
	total := since(p.now, start)
	if p.reqLog != nil {
		p.reqLog.LogAttrs(ctx, slog.LevelInfo, "call",
			slog.String("method", method), slog.String("upstream", upstream),
			slog.String("model", o.model), slog.String("version", o.version),
			slog.String("code", code.String()), slog.Duration("total", total),
			slog.Duration("upstream_time", o.upstream),
			slog.Int64("bytes_in", o.bytesIn), slog.Int64("bytes_out", o.bytesOut))
	}
	if p.rec != nil {
		route := o.route
		if route == "" {
			route = monitor.RoutePrimary
		}
		p.rec.Record(monitor.SeriesKey{
			Model: o.model, Version: o.version, Method: method, Upstream: upstream,
			CodeClass: codeClass(code), Route: route,
		}, monitor.Sample{
			Total: total, Upstream: o.upstream, Queue: o.queue, Code: code.String(),
			BytesIn: o.bytesIn, BytesOut: o.bytesOut,
		})
	}
}

// proxyDeadlinePassed reports whether the deadline the proxy set for a call
// without one (zero when it set none) had passed at now.
func proxyDeadlinePassed(bound, now time.Time) bool {
	return !bound.IsZero() && !now.Before(bound)
}
