package proxy

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/wire"
)

// Response header keys the proxy adds to every answer that did not come
// from the model the client asked for on its primary upstream.
const (
	// HeaderRoute names the route that answered: "fallback",
	// "cascade_edge" or "cascade_escalated".
	HeaderRoute = "x-infergate-route"
	// HeaderRouteReason says why: "breaker_open", "alert", "forced",
	// "slow_start", "retry", "hedge", "shed_in_flight", "shed_deadline",
	// "shed_queue_full", "low_confidence", "confident", "edge_failed",
	// "primary_failed" or "primary_slow".
	HeaderRouteReason = "x-infergate-route-reason"
)

// Why a call was answered by a route other than its primary; the values of
// HeaderRouteReason and of the reason label of the route metrics.
const (
	reasonBreaker       = "breaker_open"
	reasonAlert         = "alert"
	reasonForced        = "forced"
	reasonRetry         = "retry"
	reasonHedge         = "hedge"
	reasonShedInFlight  = "shed_in_flight"
	reasonShedDeadline  = "shed_deadline"
	reasonShedQueueFull = "shed_queue_full"
	reasonSlowStart     = "slow_start"
	reasonLowConfidence = "low_confidence"
	reasonConfident     = "confident"
	reasonEdgeFailed    = "edge_failed"
	reasonPrimaryFailed = "primary_failed"
	reasonPrimarySlow   = "primary_slow"
)

// fallbackReasons lists the reasons a call goes to the fallback, in the
// order of routeCounters.fallback.
var fallbackReasons = [...]string{reasonBreaker, reasonSlowStart, reasonAlert, reasonForced, reasonRetry, reasonHedge,
	reasonShedInFlight, reasonShedDeadline, reasonShedQueueFull}

// shedReasons lists why a call was rejected, in the order of
// routeCounters.shed.
var shedReasons = [...]string{reasonShedInFlight, reasonShedDeadline}

// routeCounters are one model's route metrics.
type routeCounters struct {
	primary, fallback, cascadeEdge, cascadeEscalated atomic.Uint64
	fallbackBy                                       [len(fallbackReasons)]atomic.Uint64
	shed                                             [len(shedReasons)]atomic.Uint64
	hedges, hedgesWon, retries, retriesWon           atomic.Uint64
	// degraded counts successful answers from the fallback model.
	degraded atomic.Uint64
}

func (c *routeCounters) fellBack(reason string) {
	if i := slices.Index(fallbackReasons[:], reason); i >= 0 {
		c.fallbackBy[i].Add(1)
	}
}

// wasShed counts a call rejected at once for reason.
func (c *routeCounters) wasShed(reason string) {
	if i := slices.Index(shedReasons[:], reason); i >= 0 {
		c.shed[i].Add(1)
	}
}

// testHookHedge, when set by a test, runs as a hedge starts.
var testHookHedge func()

// answer is one attempt's result.
type answer struct {
	header, trailer  metadata.MD
	resp             *Frame
	upstream, queue  time.Duration
	err              error
	queueFull        bool // the batcher's queue was full: not the upstream's failure
	upstreamAnswered bool
}

// routedCall is one unary call that has a route.
type routedCall struct {
	p      *Proxy
	ctx    context.Context
	method string
	kind   targetKind
	req    *Frame
	opts   []grpc.CallOption
	model  string
	ver    string
	mr     *modelRoute
	pb     *breaker // the primary's breaker, nil if none
	pri    target
	fb     *target
	// keepReq is set when something may still read req after the call
	// ends (a batch, a hedge still running): it is then left to the
	// garbage collector instead of going back to gRPC's buffer pool.
	keepReq atomic.Bool
}

// free returns the request's buffers to the pool unless something may
// still read them.
func (c *routedCall) free() {
	if !c.keepReq.Load() {
		c.req.Free()
	}
}

// routeUnary forwards a unary call that names a model, where the
// router's Pick sends it (breakers, fallback, cascade, shedding, hedging,
// retries).
func (p *Proxy) routeUnary(ctx context.Context, up *Upstream, method string, kind targetKind, req *Frame,
	ss grpc.ServerStream, opts []grpc.CallOption, o outcome) outcome {
	info := pickInfo{model: o.model}
	info.deadline, _ = ctx.Deadline()
	pk := p.router.Pick(up, info)
	defer pk.release()
	if pk.probe != nil {
		defer pk.done(verdictNone) // a no-op once reported
	}
	if pk.mr == nil && pk.pb == nil {
		return p.forward(ctx, up, method, kind, req, ss, opts, o)
	}
	if pk.err != nil {
		var sh *shedError
		if errors.As(pk.err, &sh) {
			pk.mr.live.counters.wasShed(sh.reason)
		}
		o.err = statusOf(pk.err)
		return o
	}
	c := &routedCall{p: p, ctx: ctx, method: method, kind: kind, req: req, opts: opts, model: o.model, ver: o.version,
		mr: pk.mr, pb: pk.pb, pri: pk.pri}
	defer c.free()
	if pk.mr == nil {
		// A model without a route on an upstream with a breaker.
		a := c.attempt(ctx, c.pri)
		c.report(pk.probe, a)
		return p.reply(ss, a, monitor.RoutePrimary, "", c.pri.up, o, nil)
	}
	if pk.hasFallback {
		c.fb = &pk.fb
	}
	switch pk.route {
	case monitor.RouteFallback:
		return c.viaFallback(ss, o, pk.reason)
	case RouteCascadeMode:
		return c.cascade(ss, o)
	}
	return c.viaPrimary(ss, o, pk.probe)
}

// viaFallback answers from the fallback.
func (c *routedCall) viaFallback(ss grpc.ServerStream, o outcome, reason string) outcome {
	a := c.tryFallback(c.ctx)
	c.mr.live.counters.fallback.Add(1)
	c.mr.live.counters.fellBack(reason)
	return c.p.reply(ss, a, monitor.RouteFallback, reason, c.fb.up, o, &c.mr.live.counters)
}

// viaPrimary sends the call to the primary (hedged to the fallback when
// it is slow), retries it on the fallback when it fails and that is safe,
// and answers. report is the half-open probe's report, nil when closed.
func (c *routedCall) viaPrimary(ss grpc.ServerStream, o outcome, report func(verdict)) outcome {
	live := c.mr.live
	idempotent := !c.mr.cfg.NonIdempotent
	if c.fb != nil {
		c.p.router.budget.deposit()
	}
	var a answer
	hedged := false
	after, slow := c.patience()
	if after > 0 && c.fb != nil && idempotent {
		var h *answer
		a, h = c.hedge(c.pri, report, after, slow)
		if h != nil {
			hedged = true
			if h.err == nil && (a.err != nil || a.resp == nil) {
				live.counters.hedgesWon.Add(1)
				live.counters.fallback.Add(1)
				live.counters.fellBack(reasonHedge)
				return c.p.reply(ss, *h, monitor.RouteFallback, reasonHedge, c.fb.up, o, &c.mr.live.counters)
			}
		}
	} else {
		a = c.attempt(c.ctx, c.pri)
		c.report(report, a)
	}
	if a.err != nil && c.fb != nil && (a.queueFull || (idempotent && !hedged && c.retryable(a))) && c.ctx.Err() == nil {
		reason := reasonRetry
		if a.queueFull {
			reason = reasonShedQueueFull
		} else if c.mr.fallbackOpen() || !c.p.router.budget.take() {
			live.counters.primary.Add(1)
			return c.p.reply(ss, a, monitor.RoutePrimary, "", c.pri.up, o, &c.mr.live.counters)
		}
		if reason == reasonRetry {
			live.counters.retries.Add(1)
		}
		f := c.tryFallback(c.ctx)
		if f.err == nil {
			if reason == reasonRetry {
				live.counters.retriesWon.Add(1)
			}
			live.counters.fallback.Add(1)
			live.counters.fellBack(reason)
			f.upstream += a.upstream
			return c.p.reply(ss, f, monitor.RouteFallback, reason, c.fb.up, o, &c.mr.live.counters)
		}
	}
	live.counters.primary.Add(1)
	return c.p.reply(ss, a, monitor.RoutePrimary, "", c.pri.up, o, &c.mr.live.counters)
}

// retryable says whether a failed primary attempt may be tried again on
// the fallback: the upstream failed (a failure code), not the request.
func (c *routedCall) retryable(a answer) bool {
	code := status.Code(a.err)
	if c.pb != nil {
		return c.pb.isFailure(code, 0)
	}
	for _, fc := range DefaultFailureCodes {
		if fc == code {
			return true
		}
	}
	return false
}

// patience is how long the primary gets before the fallback is asked (a
// hedge) or a cascade answers with the edge's answer it holds: the hedge
// delay, and no later than half of what the call's deadline leaves; 0 for
// no limit. slow says whether the primary still unanswered then counts as
// a slow call for its breaker.
func (c *routedCall) patience() (after time.Duration, slow bool) {
	after = c.hedgeAfter() // 0: off, or automatic with the tail unknown
	auto := c.mr.cfg.HedgeAfter == 0
	slow = true
	if dl, ok := c.ctx.Deadline(); ok && c.mr.cfg.HedgeAfter >= 0 {
		// The fallback needs time to answer: no later than half of what
		// the deadline leaves; with the tail unknown, that is the
		// automatic delay (a primary hung from the start is then hedged,
		// and tripped, before the callers' deadlines). Shorter than the
		// model's delay, it shows the primary slow only past the slowest
		// of its healthy calls (its p99.9). An automatic delay never
		// ends before that: it would replace healthy answers that were
		// still on time.
		if left := dl.Sub(c.p.router.opts.Now()) / 2; left > 0 && (after == 0 || left < after) {
			tail := time.Duration(c.mr.live.tail.Load())
			after = left
			if auto {
				after = max(after, tail)
			}
			slow = (tail > 0 && after > tail) || (auto && tail == 0)
		}
	}
	return after, slow
}

// minHedgeAfter is the least automatic hedge delay.
const minHedgeAfter = 10 * time.Millisecond

// hedgeAfter is the model's hedge delay: configured, or three times the
// primary's recent p99.9 (see censoredTail), at least 10ms, or 0 while
// that is unknown (then only a call's deadline sets one: see viaPrimary).
// Not capped: a model whose healthy calls take minutes is hedged only
// past its own tail, and a call's deadline bounds the delay.
func (c *routedCall) hedgeAfter() time.Duration {
	d := c.mr.cfg.HedgeAfter
	if d != 0 {
		return d
	}
	if tail := time.Duration(c.mr.live.tail.Load()); tail > 0 {
		return max(3*tail, minHedgeAfter)
	}
	return 0
}

// hedge calls t and, if it has not answered after the delay, the fallback
// too (from the budget). It returns the primary's answer and the hedge's
// (nil when none was sent). With slow, a primary still unanswered at the
// delay counts as a slow call for its breaker at that moment: a hung
// upstream trips its breaker within the delay, not at the callers'
// deadlines.
func (c *routedCall) hedge(t target, report func(verdict), after time.Duration, slow bool) (answer, *answer) {
	pctx, pcancel := context.WithCancel(c.ctx)
	defer pcancel()
	hctx, hcancel := context.WithCancel(c.ctx)
	defer hcancel()
	var reported atomic.Bool
	hedged := make(chan *answer, 1)
	timer := time.AfterFunc(after, func() {
		// This goroutine is not the handler's: the server's recovery
		// interceptor does not see it. A panic fails the hedge only.
		defer func() {
			if v := recover(); v != nil {
				err := c.p.panicked(c.ctx, v, "hedge")
				hedged <- &answer{err: err}
			}
		}()
		if testHookHedge != nil {
			testHookHedge()
		}
		// hctx ended: the primary answered as the timer fired; no hedge,
		// no budget spent.
		if c.ctx.Err() != nil || hctx.Err() != nil || c.mr.fallbackOpen() {
			hedged <- nil
			return
		}
		// Slow whether or not the budget affords a hedge: when hedges
		// run out (a slowdown under load), the calls still waiting on
		// the primary are the ones that must trip its breaker. Not when
		// the fallback is down too: tripping would fail slow calls that
		// are still being answered.
		if slow && reported.CompareAndSwap(false, true) {
			c.reportFailed(report)
		}
		if !c.p.router.budget.take() {
			hedged <- nil
			return
		}
		c.mr.live.counters.hedges.Add(1)
		h := c.tryFallback(hctx)
		if h.err == nil {
			pcancel() // the hedge answered: stop waiting for the primary
		}
		hedged <- &h
	})
	a := c.attempt(pctx, t)
	if timer.Stop() {
		c.report(report, a)
		return a, nil
	}
	if a.err == nil && pctx.Err() == nil {
		// The hedge may still be reading the request as this returns.
		c.keepReq.Store(true)
		// The primary answered first; the hedge is cancelled.
		if reported.CompareAndSwap(false, true) {
			c.report(report, a)
		}
		return a, nil
	}
	h := <-hedged
	if reported.CompareAndSwap(false, true) {
		// A primary call cancelled because the hedge answered says
		// nothing of the primary.
		reportTo(c.pb, pctx, report, a)
	}
	return a, h
}

// cascade serves edge first: the fallback answers, and an answer below the
// confidence threshold goes to the primary.
func (c *routedCall) cascade(ss grpc.ServerStream, o outcome) outcome {
	live := c.mr.live
	cc := c.mr.cfg.Cascade
	e := c.tryFallback(c.ctx)
	reason := reasonEdgeFailed
	if e.err == nil {
		conf, err := confidence(c.kind, e.resp, cc.Output)
		if err == nil && conf >= cc.Threshold {
			live.counters.cascadeEdge.Add(1)
			return c.p.reply(ss, e, monitor.RouteCascadeEdge, reasonConfident, c.fb.up, o, &c.mr.live.counters)
		}
		reason = reasonLowConfidence
	}
	var report func(verdict)
	ok, cut := true, false
	if c.pb != nil {
		report, ok = c.pb.admit()
	}
	if report != nil {
		defer report(verdictNone) // a no-op once reported
	}
	if ok {
		var a answer
		a, cut = c.escalate(report, e.err == nil)
		if a.err == nil || e.err != nil {
			live.counters.cascadeEscalated.Add(1)
			a.upstream += e.upstream
			return c.p.reply(ss, a, monitor.RouteCascadeEscalated, reason, c.pri.up, o, &c.mr.live.counters)
		}
	}
	// The primary cannot help: the edge's answer, however unsure, beats
	// an error.
	reason = reasonPrimaryFailed
	if cut {
		reason = reasonPrimarySlow
	}
	live.counters.cascadeEdge.Add(1)
	return c.p.reply(ss, e, monitor.RouteCascadeEdge, reason, c.fb.up, o, &c.mr.live.counters)
}

// escalate sends a cascade's call to the primary. With the edge's answer
// in hand (held), the primary gets the model's patience, not the whole
// deadline: a hung primary would otherwise make the caller miss the
// answer the proxy already has. Cut off there (cut), the primary counts as
// slow for its breaker as a hedged call would.
func (c *routedCall) escalate(report func(verdict), held bool) (a answer, cut bool) {
	var after time.Duration
	slow := false
	if held {
		after, slow = c.patience()
	}
	if after <= 0 {
		a = c.attempt(c.ctx, c.pri)
		c.report(report, a)
		return a, false
	}
	cutAt := c.p.router.opts.Now().Add(after)
	ctx, cancel := context.WithDeadline(c.ctx, cutAt)
	defer cancel()
	a = c.attempt(ctx, c.pri)
	// The clock, not ctx.Err(), says whether the patience ran out: the
	// primary got the deadline too and its DEADLINE_EXCEEDED can arrive
	// before the context's timer fires.
	if a.err == nil || c.ctx.Err() != nil || c.p.router.opts.Now().Before(cutAt) {
		c.report(report, a)
		return a, false
	}
	switch {
	case slow:
		c.reportFailed(report)
	case report != nil:
		report(verdictNone) // cut before its tail: says nothing
	}
	return a, true
}

// confidence reads the edge answer's confidence from its output tensor.
func confidence(kind targetKind, resp *Frame, output string) (float64, error) {
	if kind == targetPredict {
		return wire.PredictConfidence(resp.Bytes(), output)
	}
	return wire.ModelInferConfidence(resp.Bytes(), output)
}

// report tells the primary's breaker how an attempt went (see reportTo).
func (c *routedCall) report(probe func(verdict), a answer) {
	reportTo(c.pb, c.ctx, probe, a)
}

// reportTo tells a breaker how an attempt made with ctx went: the probe's
// report in the half-open state, the closed-state count otherwise. A call
// cancelled (by the client, or because another attempt answered) says
// nothing of the upstream.
func reportTo(b *breaker, ctx context.Context, probe func(verdict), a answer) {
	if b == nil {
		return
	}
	if errors.Is(ctx.Err(), context.Canceled) || a.queueFull {
		if probe != nil {
			probe(verdictNone)
		}
		return
	}
	failed := b.isFailure(status.Code(a.err), a.upstream)
	if probe != nil {
		v := verdictOK
		if failed {
			v = verdictFailed
		}
		probe(v)
		return
	}
	b.record(failed)
}

// tryFallback sends the call to the fallback, through the fallback
// upstream's own breaker when it has one: while that is open the attempt
// fails at once with UNAVAILABLE, so a model whose primary and fallback
// are both down gets an explicit answer without waiting on either.
func (c *routedCall) tryFallback(ctx context.Context) answer {
	b := c.mr.fallback
	if b == nil {
		return c.attempt(ctx, *c.fb)
	}
	probe, ok := b.admit()
	if !ok {
		return answer{err: status.Errorf(codes.Unavailable,
			"infergate: model %s: fallback upstream %s: circuit breaker open; retry later", c.model, c.fb.up.name)}
	}
	if probe != nil {
		defer probe(verdictNone) // a no-op once reported
	}
	a := c.attempt(ctx, *c.fb)
	reportTo(b, ctx, probe, a)
	return a
}

// reportFailed counts a failure (a call still unanswered at the hedge
// delay).
func (c *routedCall) reportFailed(probe func(verdict)) {
	switch {
	case c.pb == nil:
	case probe != nil:
		probe(verdictFailed)
	default:
		c.pb.record(true)
	}
}

// attempt sends the call to t once, through the batcher when it batches
// t's model, and returns the result without answering the client.
func (c *routedCall) attempt(ctx context.Context, t target) (a answer) {
	req, model, version := c.req, c.model, c.ver
	if t.rewrite {
		b, err := rewriteTarget(c.kind, c.req.Bytes(), t.model, t.version)
		if err != nil {
			a.err = status.Errorf(codes.InvalidArgument, "infergate: cannot address the request to model %s: %v", t.model, err)
			return a
		}
		req, model, version = NewFrame(b), t.model, t.version
	}
	p := c.p
	if p.batcher != nil && p.batcher.Handles(c.method, model) {
		// The batcher may read the bytes after a caller gave up.
		c.keepReq.Store(true)
		md, _ := metadata.FromOutgoingContext(ctx)
		res, err := p.batcher.Do(ctx, batcher.Request{
			Upstream: t.up.name, Invoke: p.invoker(t.up), Method: c.method,
			Model: model, Version: version, Payload: req.Bytes(), MD: md,
		})
		if !errors.Is(err, batcher.ErrNotBatched) {
			a.header, a.trailer, a.queue, a.upstream = res.Header, res.Trailer, res.Queue, res.Upstream
			if err != nil {
				a.queueFull = errors.Is(err, batcher.ErrQueueFull)
				a.err = batchStatus(err)
				return a
			}
			a.resp = NewFrame(res.Payload)
			return a
		}
	}
	resp := new(Frame)
	a.header, a.trailer, a.upstream, a.err = p.invoke(ctx, t.up, c.method, req, resp, c.opts)
	if a.err == nil {
		a.resp = resp
	}
	return a
}

// rewriteTarget returns a copy of a request addressed to model and version.
func rewriteTarget(kind targetKind, b []byte, model, version string) ([]byte, error) {
	if kind == targetPredict {
		return wire.RewritePredictTarget(b, model, version)
	}
	return wire.RewriteModelInferTarget(b, model, version)
}

// reply answers the client with a, marking answers of another route in
// the response header, and fills the outcome.
func (p *Proxy) reply(ss grpc.ServerStream, a answer, route, reason string, up *Upstream, o outcome, ctr *routeCounters) outcome {
	o.upstream += a.upstream
	o.queue += a.queue
	o.route, o.upName = route, up.name
	header := a.header
	if route != monitor.RoutePrimary {
		// A batched answer's header is the batch's, read by every caller
		// of it at once (batcher.Result): mark a copy.
		header = header.Copy()
		header.Set(HeaderRoute, route)
		if reason != "" {
			header.Set(HeaderRouteReason, reason)
		}
	}
	if header != nil {
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
	o.err = ss.SendMsg(a.resp)
	a.resp.Free()
	if ctr != nil && route == monitor.RouteFallback && o.err == nil {
		ctr.degraded.Add(1)
	}
	return o
}

// streamRoute is where a routed stream goes.
type streamRoute struct {
	up     *Upstream
	route  string
	header metadata.MD // added to the upstream's response header
	first  *Frame      // the first request frame, already read
	eof    bool        // the client half-closed before sending a frame
	// rewrite readdresses each request frame to the fallback model; nil
	// when the stream goes to the model the client named.
	rewrite func(*Frame) (*Frame, error)
	// mr is the model's route, nil for a model without one: its
	// counters take the stream once it is open (a retry may still turn
	// a primary stream into a fallback one).
	mr *modelRoute
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
func (p *Proxy) routeStream(ss grpc.ServerStream, up *Upstream, kind targetKind, st *callStats) (streamRoute, error) {
	sr := streamRoute{up: up, route: monitor.RoutePrimary}
	f := new(Frame)
	if err := ss.RecvMsg(f); err != nil {
		if err == io.EOF {
			sr.eof = true
			return sr, nil
		}
		return sr, requestError(err)
	}
	sr.first = f
	st.bytesIn.Add(int64(f.Len()))
	st.setTarget(kind, f)
	model, _ := st.target()
	pk := p.router.Pick(up, pickInfo{model: model, stream: true})
	if pk.err != nil {
		return sr, statusOf(pk.err)
	}
	if pk.mr == nil {
		return sr, nil
	}
	mr := pk.mr
	sr.up, sr.mr = pk.pri.up, mr
	if pk.route == monitor.RoutePrimary {
		if pk.hasFallback {
			sr.retry = func(openErr error) (streamRoute, bool) {
				return p.retryStream(sr, mr, pk.pb, model, kind, openErr)
			}
		}
		return sr, nil
	}
	if mr.fallbackOpen() {
		return sr, statusOf(&breakerOpenError{upstream: mr.fallback.name, model: model, fallback: true})
	}
	return fallbackStream(sr, mr, model, kind, pk.reason), nil
}

// retryStream is the fallback route of a stream whose primary stream could
// not be opened with UNAVAILABLE (connection refused, no connection: the
// first frame never left): the failure counts for the primary's breaker,
// and the stream goes to the fallback from the retry budget, as a unary
// call that failed before reaching the upstream would.
func (p *Proxy) retryStream(sr streamRoute, mr *modelRoute, pb *breaker, model string, kind targetKind, openErr error) (streamRoute, bool) {
	if status.Code(openErr) != codes.Unavailable {
		return sr, false
	}
	if pb != nil && pb.State() == BreakerClosed {
		pb.record(true)
	}
	if mr.cfg.NonIdempotent || mr.fallbackOpen() || !p.router.budget.take() {
		return sr, false
	}
	mr.live.counters.retries.Add(1)
	return fallbackStream(sr, mr, model, kind, reasonRetry), true
}

// fallbackStream readdresses a stream's route to the model's fallback.
func fallbackStream(sr streamRoute, mr *modelRoute, model string, kind targetKind, reason string) streamRoute {
	fb := mr.cfg.Fallback
	sr.retry = nil
	name := fb.Model
	if name == "" {
		name = model
	}
	if fb.Upstream != nil {
		sr.up = fb.Upstream
	}
	sr.route = monitor.RouteFallback
	sr.header = metadata.Pairs(HeaderRoute, monitor.RouteFallback, HeaderRouteReason, reason)
	version := fb.Version
	sr.rewrite = func(f *Frame) (*Frame, error) {
		b, err := rewriteTarget(kind, f.Bytes(), name, version)
		if err != nil {
			return nil, err
		}
		return NewFrame(b), nil
	}
	mr.live.counters.fallback.Add(1)
	mr.live.counters.fellBack(reason)
	return sr
}
