package proxy

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proxy/h2relay"
)

// The call pipeline. Whichever side of the proxy read a call (the relay,
// for calls on client connections; grpc-go's server, for streams and for
// calls the relay hands on), the same steps run, each written once:
//
//	way       forward it as bytes, serve it here, or hand it to grpc-go
//	          (sendWay: the relay asks it for every unary call it read)
//	admit     the in-flight cap (admit, leave)
//	deadline  the proxy's own deadline for a call without one (timeoutFor)
//	pick      the director's upstream, a release's split (release.go),
//	          then the router's Pick (routed.go)
//	attempts  one, or a hedge, retry or cascade of them (attempt.go)
//	answer    the one reply (reply.go) or status (statusOf, status.go)
//	record    recordCall (handler.go), after the timeout verdict (timeoutVerdict)
//
// A forwarded call runs the same admit, deadline and verdict; its one
// attempt is the relay's (fastpath.go), through the same endpoint handle
// (handle.go) as any attempt, and recordCall records it. A served
// call runs serveCall below, whether grpc-go or the relay read it.

// side is where a served call's request is read and its answer written:
// grpc-go's server stream, or the relay's (relaySide, fastpath_serve.go).
// The pipeline uses nothing else of either.
type side interface {
	RecvMsg(m any) error
	SetHeader(metadata.MD) error
	SetTrailer(metadata.MD)
	SendMsg(m any) error
}

// serveCall runs one call the proxy answers itself through the pipeline and
// returns its status. ctx is the call's: the client's deadline, its
// cancellation and its metadata. s is the side that read it; ss is set
// when grpc-go read it, and only then can the call be a stream.
func (p *Proxy) serveCall(ctx context.Context, method string, s side, ss grpc.ServerStream) (err error) {
	// A panic in a call's handler becomes INTERNAL for that call, is
	// counted and logged with its stack; the server keeps serving. (The
	// stream pumps and hedges recover on their own goroutines.) Here, not
	// in a stream interceptor: with any interceptor installed grpc-go
	// allocates a StreamServerInfo for every call.
	defer func() {
		if v := recover(); v != nil {
			err = statusOf(p.panicked(ctx, v, "call handler"))
		}
	}()
	start := p.now()
	var span trace.Span
	if p.tracing != nil {
		ctx, span = p.tracing.startServer(ctx, method)
	}
	if !p.admit() {
		p.rejected.Add(1)
		return p.recordCall(ctx, span, start, method, "", outcome{err: &inFlightError{max: p.maxInFlight}})
	}
	defer p.leave()
	up, err := p.director.Direct(ctx, method)
	if err == nil && up == nil {
		err = &internalError{msg: "director returned no upstream for " + method}
	} else if err != nil {
		err = p.noRoute(ctx, method, err)
	}
	if err != nil {
		return p.recordCall(ctx, span, start, method, "", outcome{err: err})
	}
	// Where up is now: a call in flight when it moves (Upstream.Move)
	// is recorded where it went.
	dest := up.dest.Load()
	var inFlight *monitor.Gauge
	if p.rec != nil {
		inFlight = p.inFlight(dest)
		inFlight.Inc()
	}

	outCtx, subtype := outgoingContext(ctx)
	var subtypeOpt grpc.CallOption // the client's content-subtype; nil: none
	if subtype != "" {
		subtypeOpt = grpc.CallContentSubtype(subtype)
	}
	info := methods.Lookup(method)
	var o outcome
	if info.Unary || ss == nil {
		var bound time.Time // the proxy's deadline, when it set one
		_, has := ctx.Deadline()
		if d := p.timeoutFor(has); d > 0 {
			var cancel context.CancelFunc
			outCtx, cancel = context.WithTimeout(outCtx, d)
			defer cancel()
			bound, _ = outCtx.Deadline()
		}
		// What the call holds (its request, then its answer) counts
		// against the budget the relay's streams share; while it is
		// spent the call waits here, before its message is read.
		var claim budget.Claim
		if err := p.budget.Admit(ctx, &claim); err != nil {
			o.err = budgetFailed(err)
		} else {
			o = p.unary(outCtx, bound.IsZero(), up, method, info.Target, s, subtypeOpt, &claim)
		}
		claim.Release()
		o.err = p.timeoutVerdict(bound, time.Now(), ctx.Err() != nil, o.err)
	} else {
		o = p.stream(outCtx, up, method, info.Target, ss, subtypeOpt)
	}
	// The director's upstream by its name when the call started, should
	// it have moved since.
	o.upName = dest.name
	if o.by != nil && o.by != up {
		o.upName = o.by.Name()
	}
	if o.rel != nil {
		o.rel.observe(ctx, since(p.now, start), o.err, o.feat.Rows)
	}
	err = p.recordCall(ctx, span, start, method, o.upName, o)
	if inFlight != nil {
		inFlight.Dec()
	}
	return err
}

// admit takes a place under the proxy's cap on calls in flight
// (WithMaxInFlight) and reports true, or reports false: the cap is
// reached. A call admitted gives its place back with leave; serveCall refuses
// and counts the others.
func (p *Proxy) admit() bool {
	if n := p.calls.Add(1); p.maxInFlight > 0 && n > p.maxInFlight {
		p.calls.Add(-1)
		return false
	}
	return true
}

// leave gives back the place admit took.
func (p *Proxy) leave() { p.calls.Add(-1) }

// timeoutFor is the deadline the proxy gives a unary call that came
// without one (WithUpstreamTimeout); 0 for none, and for a call that has
// the client's.
func (p *Proxy) timeoutFor(hasDeadline bool) time.Duration {
	if hasDeadline {
		return 0
	}
	return p.upstreamTimeout
}

// timeoutVerdict is the proxy-timeout verdict: a call that ended with
// DEADLINE_EXCEEDED once the deadline the proxy set itself (bound; zero
// for none) had passed, its client still there, ended by the proxy's own
// timeout, and says so. Only then: an upstream that answers
// DEADLINE_EXCEEDED by itself before it keeps its word. The clock, not a
// context, says so: the upstream got the deadline as grpc-timeout
// (rounded up) and may answer before the proxy's timer fires on a loaded
// machine.
func (p *Proxy) timeoutVerdict(bound, now time.Time, clientGone bool, err error) error {
	if err == nil || bound.IsZero() || clientGone || now.Before(bound) || codeOf(err) != codes.DeadlineExceeded {
		return err
	}
	return &proxyTimeoutError{timeout: p.upstreamTimeout}
}

// way is where a unary call the relay read goes.
type way uint8

const (
	// wayHandOn: to the proxy's grpc.Server, which answers it as it
	// would without the relay (a request that is not one uncompressed
	// message: grpc-go's checks and decompression apply).
	wayHandOn way = iota
	// wayServe: answered here, on the relay's side (Serve).
	wayServe
	// wayForward: relayed as bytes to the director's one upstream, with
	// nothing to do but forward and record it.
	wayForward
)

// sendWay decides how a unary call the relay read is sent: the one place
// that says whether a call is forwarded as bytes, served here, or handed
// on. one says that the request is (or, arriving, starts as) one
// uncompressed message; msg is the message, or its first bytes when
// bytesIn is larger (a request forwarded as it arrives); model and
// version are the target it names ("" when not scanned: read from msg
// here, once the cheaper checks let the call be forwarded).
//
// A call is forwarded when nothing but forwarding is to be done (no
// tracing; a director that reads nothing of the call and whose upstream
// the relay reaches; protobuf; no batching of its model; no route,
// breaker or release that must see it) and it can go at once: it is admitted under
// the in-flight cap, needs no priority level added to its request, has
// its flow-control turn without waiting, and its endpoint is known to
// hold its model. Then rc holds all that it took, given back by its
// handle when the relay says the call is done (relayHandler.Done).
// Otherwise it is served, where each of those is done, waited for or
// refused as for any call.
func (p *Proxy) sendWay(c *h2relay.Call, one bool, msg []byte, bytesIn int64, model, version string) (way, *relayCall) {
	if !one {
		return wayHandOn, nil
	}
	if p.tracing != nil {
		return wayServe, nil
	}
	fd, ok := p.director.(fixedDirector)
	if !ok {
		return wayServe, nil
	}
	up := fd.fixed()
	d := up.dest.Load()
	if d.relayAddr == "" {
		return wayServe, nil
	}
	if sub := contentSubtypeOf(c); sub != "" && sub != "proto" {
		return wayServe, nil // no model name to read
	}
	if model == "" && msg != nil {
		model, version = bytesTarget(methods.Lookup(c.Method).Target, msg)
	}
	if model != "" {
		if p.batcher != nil && p.batcher.Handles(c.Method, model) {
			return wayServe, nil
		}
		if p.router != nil && methods.IsInference(c.Method) && !p.router.Plain(up, model) {
			return wayServe, nil
		}
		if p.releases != nil && p.releases.Route(model) != nil && methods.IsInference(c.Method) {
			return wayServe, nil // split, rewritten and judged where it is served (release.go)
		}
	}
	if !p.admit() {
		return wayServe, nil // over the in-flight cap: served, and so refused
	}
	// What the call takes is held on the stack until it is forwarded: a
	// call served after all allocates nothing here.
	hs := handle{p: p, up: up, model: model}
	h := &hs
	if cfg := p.flow.on(); cfg != nil && model != "" && methods.IsInference(c.Method) {
		// Its band's priority level must be added to the request, or
		// its replicas are full and it must wait its turn: served.
		if p.flow.needsLevel(c.Method, model, msg) || !h.tryTurn(cfg, c.Header, msg, c.Deadline) {
			p.leave()
			return wayServe, nil
		}
	}
	key := ""
	if hd := up.AffinityHeader(); hd != "" {
		for _, f := range c.Header {
			if f.Name == hd { // HTTP/2 header names are lower case
				key = f.Value
				break
			}
		}
	}
	now := time.Now() // not the proxy's clock: the relay's reads of it time the call
	err := h.pickEndpoint(now, c.Method, msg, key, nil)
	if err == nil && model != "" && !h.ep.ModelsKnown() && up.Len() > 1 {
		// A replica not asked for its models yet (a pool just started,
		// an endpoint just added): served, where a NOT_FOUND from a
		// replica without the model is sent again to another.
		err = errModelsUnknown
	}
	if err != nil {
		// Served: the pipeline answers the same refusal, or sends it
		// where it may go.
		h.abandon(now)
		p.leave()
		return wayServe, nil
	}
	rc := &relayCall{h: hs, upName: d.name, version: version, bytesIn: bytesIn}
	if p.rec != nil {
		rc.gauge = p.inFlight(d)
		rc.gauge.Inc()
	}
	c.Timeout = p.timeoutFor(!c.Deadline.IsZero())
	scanFeatures(methods.Lookup(c.Method).Inputs, msg, bytesIn, p.inputShapes, &rc.feat, &rc.wf)
	c.Data = rc
	return wayForward, rc
}

// errModelsUnknown: the endpoint picked has not said which models it
// holds yet.
var errModelsUnknown = errors.New("the replica's models are not known yet")
