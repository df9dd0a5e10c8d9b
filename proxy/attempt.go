package proxy

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/pool"
	"github.com/infergate/infergate/proxy/route"
)

// One attempt: a received unary request sent once to one target, through
// the batcher when it batches the target's model. Every unary call is
// made of attempts: a plain call of one; a routed call of one or more,
// composed by routed.go (primary, fallback), hedge.go, retry.go and
// cascade.go. The client's reply is written once, by reply (reply.go).

// attemptResult is one attempt's result: every attempt, batched or not,
// primary or fallback, returns one.
type attemptResult struct {
	// header and trailer are the upstream's (a batch's are shared by its
	// callers: copy before changing them).
	header, trailer metadata.MD
	resp            *Frame // the response; nil when err is set
	upstream, queue time.Duration
	// err is the attempt's failure as inner code reports it (status.go's
	// kinds, a batcher sentinel, a status the upstream sent); statusOf
	// turns it into what the client sees.
	err error
	// queueFull: the batcher's queue was full, not the upstream's failure.
	queueFull bool
	// batch is the merged call the attempt rode in; nil if none.
	batch *batcher.Batch
	// endpointHedge: a hedge sent to another endpoint of the primary's
	// pool; its answer is the primary model's.
	endpointHedge bool
}

// Why an attempt is made, for its trace span: attemptPrimary, or the
// reason a fallback attempt was made (route.ReasonHedge, route.ReasonRetry, ...).
const (
	attemptPrimary    = "primary"
	reasonCascadeEdge = "cascade_edge"
	reasonEscalation  = "cascade_escalation"
)

// call is one received unary request: what each of its attempts sends.
type call struct {
	p      *Proxy
	ctx    context.Context
	method string
	kind   wire.TargetKind
	req    *Frame
	// subtype is the client's content-subtype option; nil: none.
	subtype        grpc.CallOption
	model, version string
	// clientDeadline: ctx's deadline is the one the client sent, not the
	// proxy's upstream timeout (for the breakers: reportTo).
	clientDeadline bool
	// keepReq is set when something may still read req after the call
	// ends (a batch, a hedge still running): it is then left to the
	// garbage collector instead of going back to gRPC's buffer pool.
	keepReq atomic.Bool
	// once: the call's model is not idempotent (its route says so): it
	// is never sent twice.
	once bool
	// attempts counts the attempts made (hedges, retries, a cascade's
	// escalation), for the slow-call records.
	attempts atomic.Int32
}

// request is a unary call's request frame, the exchange of its one
// upstream call and the scan of what it carried: one allocation where
// there were three.
type request struct {
	frame Frame
	first exchange
	wf    wire.Features
}

// free returns the request's buffers to the pool unless something may
// still read them.
func (c *call) free() {
	if !c.keepReq.Load() {
		c.req.Free()
	}
}

// target is where one attempt goes: a route.Target (a Pick's) whose
// upstream is this package's.
type target struct {
	up             *Upstream
	model, version string
	rewrite        bool // the request's model name and version are replaced
}

// targetOf is the attempts' target of a Pick's t.
func targetOf(t route.Target) target {
	up, _ := t.Up.(*Upstream)
	return target{up: up, model: t.Model, version: t.Version, rewrite: t.Rewrite}
}

// attempt sends the call to t once and returns the result without
// answering the client; why says what the attempt is for (its trace span).
func (c *call) attempt(ctx context.Context, t target, why string) attemptResult {
	return c.attemptWith(ctx, t, why, nil)
}

// attemptWith is attempt with the exchange the upstream call fills in
// (nil: one is allocated), which must be unused.
func (c *call) attemptWith(ctx context.Context, t target, why string, x *exchange) (a attemptResult) {
	c.attempts.Add(1)
	req, model, version := c.req, c.model, c.version
	if tr := c.p.tracing; tr != nil {
		if t.rewrite {
			model = t.model
		}
		var span trace.Span
		ctx, span = tr.startClient(ctx, c.method, t.up, why, attrModel.String(model))
		defer func() { tr.endClient(span, a.err, a.queue, a.batch) }()
	}
	if t.rewrite {
		b, err := rewriteTarget(c.kind, c.req.Bytes(), t.model, t.version)
		if err != nil {
			a.err = &rewriteError{model: t.model, err: err}
			return a
		}
		req, model, version = NewFrame(b), t.model, t.version
	}
	p := c.p
	if p.batcher != nil && p.batcher.Handles(c.method, model) {
		var wait time.Duration
		if p.flow.on() != nil {
			if x == nil {
				x = new(exchange)
			}
			// Flow control in front of the batcher's queue: the
			// turn is the call's until it returns, batched or sent
			// alone (x.turned: invoke takes none again).
			x.ownTimeout = c.ownTimeout()
			done, err := p.batchTurn(ctx, t.up, model, req, x, &a)
			if err != nil {
				a.err, a.queue, a.queueFull = err, x.wait, refusedByFlow(err)
				a.trailer = pushback(err)
				return a
			}
			defer done()
			wait = x.wait
		}
		// The batcher may read the bytes after a caller gave up.
		c.keepReq.Store(true)
		md, _ := metadata.FromOutgoingContext(ctx)
		res, err := p.batcher.Do(ctx, batcher.Request{
			Upstream: t.up.Name(), Invoke: p.invoker(t.up), Method: c.method,
			Model: model, Version: version, Payload: req.Bytes(), MD: md,
		})
		if !errors.Is(err, batcher.ErrNotBatched) {
			a.header, a.trailer, a.queue, a.upstream, a.batch = res.Header, res.Trailer, wait+res.Queue, res.Upstream, res.Batch
			if err != nil {
				a.queueFull = errors.Is(err, batcher.ErrQueueFull)
				a.err = err
				return a
			}
			a.resp = NewFrame(res.Payload)
			return a
		}
	}
	if x == nil {
		x = new(exchange)
	}
	x.once, x.ownTimeout = c.once, c.ownTimeout()
	a.upstream, a.err = p.invoke(ctx, t.up, c.method, req, x, c.subtype)
	a.queue = x.wait
	if a.err != nil && refusedByFlow(a.err) {
		a.queueFull = true // refused here: nothing reached the upstream
		x.trailer = pushback(a.err)
	}
	a.header, a.trailer = x.header, x.trailer
	if a.err == nil {
		a.resp = &x.resp
	}
	return a
}

// exchange is what one upstream unary call fills in: the response, and
// the header and trailer gRPC writes through the call options that point
// at them. One allocation where separate variables took four (the frame,
// the two escaping MD variables, the options slice).
type exchange struct {
	resp            Frame
	header, trailer metadata.MD
	// opts backs the call's options (callOptions), then Header and
	// Trailer.
	opts [6]grpc.CallOption
	// h holds what the call took to be sent (invoke, batchTurn).
	h handle
	// avoid is an endpoint not to send it to (a hedge leaves its
	// primary's out); picked, when set, is told the endpoint it went to.
	avoid  *Endpoint
	picked *atomic.Pointer[Endpoint]
	// once: never sent twice, not even to another endpoint after its
	// connection died under it (a model that is not idempotent).
	once bool
	// wait is how long it waited for its turn (flow control); turned:
	// it has it (or needs none).
	wait   time.Duration
	turned bool
	// ownTimeout is the proxy's upstream timeout when it stands for the
	// deadline of a call that carried none (0 otherwise): flow control's
	// refusal says so.
	ownTimeout time.Duration
}

// ownTimeout is the proxy's upstream timeout if it is c's deadline (the
// client sent none), else 0.
func (c *call) ownTimeout() time.Duration {
	if c.clientDeadline {
		return 0
	}
	return c.p.upstreamTimeout
}

// invoke makes one unary upstream call with raw frames: the one upstream
// call of an attempt and of the batcher's Invoker, with the client's
// content-subtype option (nil: none). It fills x (the response, the
// upstream's header and trailer) and returns the call's time and an
// *upstreamError. What it takes (a flow-control turn for a call flow
// control orders, then an endpoint) it holds through x.h, which gives it
// all back as it returns.
func (p *Proxy) invoke(ctx context.Context, up *Upstream, method string, req *Frame, x *exchange,
	subtype grpc.CallOption) (took time.Duration, err error) {
	h := &x.h
	if !x.turned {
		*h = handle{p: p, up: up}
	} // else a batched caller's turn (batchTurn), given back here once sent alone
	// A hedge takes no turn (it must not wait); a batch's callers took
	// theirs before its queue.
	inTurn := p.flow.on() != nil && x.avoid == nil && !x.turned && methods.IsInference(method) && batcher.BatchOf(ctx) == nil
	if inTurn || x.turned || up.Len() > 1 {
		h.model, _ = frameTarget(methods.Lookup(method).Target, req) // interned: no allocation
	}
	var last sent
	defer func() { h.done(last, took, err == nil) }() // whatever happens, a panic included
	if inTurn {
		if err = h.waitTurn(ctx, req.Bytes(), x.ownTimeout); err != nil {
			return 0, err
		}
		x.wait, x.turned = h.wait, true
		if h.gate != nil && p.flow.needsLevel(method, h.model, req.Bytes()) {
			// The band reaches the model server's own scheduler too.
			level := min(uint64(h.fc.Band)+1, uint64(p.flow.levelsOf(h.model)))
			req = NewFrame(wire.AppendPriority(req.Bytes(), level))
		}
	}
	all := p.callOptions(x.opts[:0], up, subtype)
	all = append(all, grpc.Header(&x.header), grpc.Trailer(&x.trailer))
	key := ""
	if hd := up.AffinityHeader(); hd != "" && batcher.BatchOf(ctx) == nil { // a batch is no client's
		if v := metadata.ValueFromIncomingContext(ctx, hd); len(v) > 0 {
			key = v[0]
		}
	}
	t0 := p.now()
	if err = h.pickEndpoint(t0, method, req.Bytes(), key, x.avoid); err != nil {
		last = noVerdict(t0)
		return 0, err
	}
	if x.picked != nil {
		x.picked.Store(h.ep)
	}
	// send makes the call on the endpoint held, from t0.
	var fromUpstream bool
	var code codes.Code
	send := func(t0 time.Time) {
		err = h.ep.Conn().Invoke(ctx, method, req, &x.resp, all...)
		d := since(p.now, t0)
		took += d
		fromUpstream = x.header != nil || len(x.trailer) > 0
		code = status.Code(err)
		last = sent{at: t0.Add(d), took: d, code: code, fromUpstream: fromUpstream, callEnded: ctx.Err() != nil}
	}
	sentTo := h.ep.Up()
	send(t0)
	missing := pool.NotFound(code, fromUpstream) && h.model != ""
	unreachable := pool.VerdictOf(code, fromUpstream, ctx.Err() != nil) == pool.Unreachable
	if !h.pinned && (missing || unreachable) && up.Len() > 1 {
		// The call went nowhere (the endpoint was unreachable when
		// picked), to a replica without its model, or died with its
		// connection (an inference that may be sent twice, from the
		// retry budget): it goes to another replica, once, if one may
		// take it.
		now := p.now().UnixNano()
		if e2 := up.Pick(now, h.model, h.ep); e2 != h.ep && e2.Up() && e2.Holds(h.model, now) &&
			(missing || !sentTo || p.mayResend(ctx, method, x)) {
			x.header, x.trailer = nil, nil
			h.moveTo(e2, last)
			send(p.now())
		}
	}
	if err != nil {
		err = p.upstreamFailed(ctx, up, method, err, fromUpstream)
	}
	return took, err
}

// batchTurn takes a turn of model on up for a call the batcher may take,
// the gate's capacity then being the batcher's (flowCapacity), held
// through x.h. It fills x.wait and x.turned, and returns what gives the
// turn back once the attempt a has its result, or flow control's
// refusal.
func (p *Proxy) batchTurn(ctx context.Context, up *Upstream, model string, req *Frame, x *exchange, a *attemptResult) (func(), error) {
	h := &x.h
	*h = handle{p: p, up: up, model: model}
	err := h.waitTurn(ctx, req.Bytes(), x.ownTimeout)
	x.wait, x.turned = h.wait, true
	if err != nil || h.gate == nil {
		return func() {}, err
	}
	t0 := p.now()
	return func() { h.done(sent{}, since(p.now, t0), a.err == nil) }, nil
}

// mayResend says whether a call whose connection died under it, the
// replica perhaps having run it, may go to another replica: an inference
// call (a pure function of its inputs) of a model not marked
// non-idempotent, not a batch (the batcher decides for its callers), and
// within the retry budget, so a fleet losing connections is not sent
// twice the load.
func (p *Proxy) mayResend(ctx context.Context, method string, x *exchange) bool {
	return !x.once && methods.IsInference(method) && batcher.BatchOf(ctx) == nil && ctx.Err() == nil &&
		p.router != nil && p.router.Budget().Take()
}

// callOptions appends to dst the options of a unary upstream call to up:
// the raw codec; the proxy's message size limits, unless up's connections
// already default to the same (grpc-go allocates for each limit option on
// every call); the client's content-subtype option (nil: none).
func (p *Proxy) callOptions(dst []grpc.CallOption, up *Upstream, subtype grpc.CallOption) []grpc.CallOption {
	if up.callLimit == p.maxMsgSize {
		dst = append(dst, p.callOpts[0]) // the codec
	} else {
		dst = append(dst, p.callOpts...)
	}
	if subtype != nil {
		dst = append(dst, subtype)
	}
	return dst
}

// rewriteTarget returns a copy of a request addressed to model and version.
func rewriteTarget(kind wire.TargetKind, b []byte, model, version string) ([]byte, error) {
	if kind == wire.TFServingTarget {
		return wire.RewritePredictTarget(b, model, version)
	}
	return wire.RewriteModelInferTarget(b, model, version)
}
