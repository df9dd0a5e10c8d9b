package proxy

import (
	"context"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/failurelog"
)

// outcome is what one call reports to finish: its measurements and its
// error as inner code returned it (recordCall asks statusOf for the status).
type outcome struct {
	err               error
	upstream          time.Duration
	queue             time.Duration // in a batch queue
	bytesIn, bytesOut int64
	model, version    string
	// route is the monitor.Route* that answered ("" means primary), reason
	// why (HeaderRouteReason); upName the name of the upstream that
	// answered, which the handler sets from by: the upstream a route
	// chose, nil for the director's.
	route, reason, upName string
	by                    *Upstream
	// batchID is the batch the answer came from (batcher.Batch.ID); 0
	// for none.
	batchID uint64
	// attempts is the number of upstream attempts; 0: not counted.
	attempts int
	// claim is the call's hold on the byte budget (gRPC path); nil
	// where the relay holds the call's bytes.
	claim *budget.Claim
	// feat is what the request carried (features.go); recordCall sets its
	// bytes.
	feat monitor.CallFeatures
	// rel is the call's release (release.go); nil for none.
	rel *releaseCall
}

// budgetFailed is the error of a call that got no room in the byte
// budget: the client's own cancellation passes as it is.
func budgetFailed(err error) error {
	if _, ok := err.(*budget.Error); ok {
		return err
	}
	return &clientError{status.FromContextError(err).Err()}
}

// handle is the grpc.StreamHandler for every method: grpc-go's side of
// the proxy hands its calls to the pipeline (serve, pipeline.go).
func (p *Proxy) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return statusOf(&internalError{msg: "no method name on the server stream"})
	}
	return p.serveCall(ss.Context(), method, ss, ss)
}

// unary reads a call known to carry one message each way and answers it
// with attempts (a single Invoke each, without a stream's two pump
// goroutines): one, or the router's composition of them.
// clientDeadline says that ctx's deadline, if any, is the client's.
func (p *Proxy) unary(ctx context.Context, clientDeadline bool, up *Upstream, method string, kind wire.TargetKind,
	ss side, subtype grpc.CallOption, claim *budget.Claim) (o outcome) {
	o.claim = claim
	// A plain call makes one upstream call, whose exchange is allocated
	// with the request frame (request). A routed call's attempts may run
	// at once (a hedge): each allocates its own, and first goes unused.
	r := new(request)
	req, first, wf := &r.frame, &r.first, &r.wf
	if err := ss.RecvMsg(req); err != nil {
		if err == io.EOF {
			o.err = errNoRequest
		} else {
			o.err = &clientError{err}
		}
		return o
	}
	o.bytesIn = int64(req.Len())
	claim.Hold(o.bytesIn)
	o.model, o.version = frameTarget(kind, req)
	if p.releases != nil && o.model != "" && methods.IsInference(method) {
		// Split before anything else sees the call: from here on it is
		// a call of the version chosen.
		var err error
		if o.rel, up, req, err = p.chooseRelease(ctx, kind, up, req, o.model, o.version); err != nil {
			o.err = err
			return o
		}
		if o.rel != nil {
			o.model, o.version = frameTarget(kind, req)
		}
	}
	keep := p.inputShapes || p.tracing != nil
	routed := p.router != nil && o.model != "" && methods.IsInference(method) && !p.router.Plain(up, o.model)
	if routed || o.rel != nil {
		// A routed call's attempts may outlive this call (a hedge), and
		// a release's shadow copy does: its state lives on the heap; a
		// plain call's stays on the stack.
		rc := &routedCall{call: call{p: p, ctx: ctx, method: method, kind: kind, req: req, subtype: subtype,
			model: o.model, version: o.version, clientDeadline: clientDeadline}}
		defer rc.free()
		frameFeatures(methods.Lookup(method).Inputs, req, keep, &o.feat, &rc.wf)
		if o.rel != nil {
			o.rel.c = &rc.call
		}
		if routed {
			o = p.routeUnary(rc, up, ss, o)
		} else {
			o = p.reply(ss, rc.attempt(ctx, target{up: up}, attemptPrimary), monitor.RoutePrimary, "", up, o, nil)
		}
		o.attempts = int(rc.attempts.Load())
		return o
	}
	frameFeatures(methods.Lookup(method).Inputs, req, keep, &o.feat, wf)
	c := call{p: p, ctx: ctx, method: method, kind: kind, req: req, subtype: subtype, model: o.model, version: o.version, clientDeadline: clientDeadline}
	defer c.free()
	o = p.reply(ss, c.attemptWith(ctx, target{up: up}, attemptPrimary, first), monitor.RoutePrimary, "", up, o, nil)
	o.attempts = int(c.attempts.Load())
	return o
}

// upstreamFailed is the error of a failed upstream call: an
// *upstreamError, logged (rate-limited) when the proxy's own client made
// it, unless the call's context ended first. CANCELED made by the proxy's
// own client while the call's context is live ("grpc: the client
// connection is closing": the upstream's connection was closed under the
// call, at a reload or shutdown) is UNAVAILABLE: the client cancelled
// nothing, and CANCELED would tell it so.
func (p *Proxy) upstreamFailed(ctx context.Context, up *Upstream, method string, err error, fromUpstream bool) error {
	if !fromUpstream && ctx.Err() == nil && status.Code(err) == codes.Canceled {
		err = status.Error(codes.Unavailable, "connection closed under the call: "+status.Convert(err).Message())
	}
	if !fromUpstream && ctx.Err() == nil {
		s := status.Convert(err)
		p.failures.Note(ctx, failurelog.Kind{Msg: "upstream call failed", Upstream: up.Name(), Code: s.Code()},
			slog.String("method", method), slog.String("error", s.Message()))
	}
	return &upstreamError{upstream: up.Name(), err: err, fromUpstream: fromUpstream}
}

// noRoute is the error of a director's refusal, logged (rate-limited)
// unless the director returned a status of its own.
func (p *Proxy) noRoute(ctx context.Context, method string, err error) error {
	if _, ok := status.FromError(err); !ok {
		p.failures.Note(ctx, failurelog.Kind{Msg: "no route", Code: codes.Unavailable},
			slog.String("method", method), slog.String("error", err.Error()))
	}
	return &directorError{method: method, err: err}
}

// recordCall turns the call's error into its status (statusOf, the one status
// edge), records and logs the call with that status, and returns it for
// the handler to give gRPC.
func (p *Proxy) recordCall(ctx context.Context, span trace.Span, start time.Time, method, upstream string, o outcome) error {
	st := statusOf(o.err)
	if p.rec == nil && p.reqLog == nil && span == nil {
		return st
	}
	code := status.Code(st)
	if code == codes.Unknown {
		// gRPC's server turns context errors into their codes.
		code = status.FromContextError(o.err).Code()
	}
	if span != nil {
		p.tracing.endServer(span, code, o)
	}
	total := since(p.now, start)
	if p.reqLog != nil {
		attrs := []slog.Attr{
			slog.String("method", method), slog.String("upstream", upstream),
			slog.String("model", o.model), slog.String("version", o.version),
			slog.String("code", code.String()), slog.Duration("total", total),
			slog.Duration("upstream_time", o.upstream),
			slog.Int64("bytes_in", o.bytesIn), slog.Int64("bytes_out", o.bytesOut),
		}
		// What a merged call cannot carry per caller is kept here: the
		// caller's request id, and the batch its answer came from.
		if id := metadata.ValueFromIncomingContext(ctx, grpcwire.HeaderRequestID); len(id) > 0 {
			attrs = append(attrs, slog.String("request_id", id[0]))
		}
		if o.batchID != 0 {
			attrs = append(attrs, slog.Uint64("batch_id", o.batchID))
		}
		p.reqLog.LogAttrs(ctx, slog.LevelInfo, "call", attrs...)
	}
	if p.rec != nil {
		route := o.route
		if route == "" {
			route = monitor.RoutePrimary
		}
		var size string // a stream's bytes span many requests: no class
		if methods.Lookup(method).Unary {
			size = monitor.SizeClassOf(o.bytesIn)
		}
		o.feat.BytesIn, o.feat.BytesOut = o.bytesIn, o.bytesOut
		sm := monitor.Sample{
			Total: total, Upstream: o.upstream, Queue: o.queue, Code: code.String(),
			BytesIn: o.bytesIn, BytesOut: o.bytesOut, Features: o.feat,
			Attempts: o.attempts, BatchID: o.batchID,
		}
		// A kept call's trace id becomes the exemplar of its latency
		// bucket; another's would point at a trace nobody kept.
		if span != nil {
			if id, ok := p.tracing.exemplar(span); ok {
				sm.TraceID = id
			}
		}
		p.rec.Record(monitor.SeriesKey{
			Model: o.model, Version: o.version, Method: method, Upstream: upstream,
			CodeClass: callClass(ctx, code, o.err), Route: route, SizeClass: size,
		}, sm)
	}
	return st
}
