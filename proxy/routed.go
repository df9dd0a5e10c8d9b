package proxy

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/route"
)

// routedCall is one unary call of a model the router knows, with the
// targets and the breaker its Pick gave it.
type routedCall struct {
	call
	mr  *route.ModelRoute
	pb  *route.Breaker // the primary's breaker, nil if none
	pri target
	fb  *target // nil: no fallback (none configured, or forced onto the primary)
	// wf is the request's scan, kept for the outcome's features (Lazy).
	wf wire.Features
	// priEp is the endpoint of the primary's pool its attempt went to,
	// once picked (a hedge goes to another).
	priEp atomic.Pointer[Endpoint]
}

// routeUnary answers a unary call that names a model where the router's
// Pick sends it: the primary (hedged, retried: hedge.go, retry.go), the
// fallback, or a cascade (cascade.go).
func (p *Proxy) routeUnary(rc *routedCall, up *Upstream, ss side, o outcome) outcome {
	info := route.PickInfo{Model: rc.model}
	info.Deadline, _ = rc.ctx.Deadline()
	pk := p.router.Pick(up, info)
	defer pk.Release()
	if pk.Probe != nil {
		defer pk.Done(route.VerdictNone) // a no-op once reported
	}
	if pk.ModelRoute == nil && pk.Breaker == nil {
		return p.reply(ss, rc.attempt(rc.ctx, target{up: up}, attemptPrimary), monitor.RoutePrimary, "", up, o, nil)
	}
	if pk.Err != nil {
		var sh *route.ShedError
		if errors.As(pk.Err, &sh) {
			pk.ModelRoute.Live().Counters.WasShed(sh.Reason)
		}
		o.err = pk.Err
		return o
	}
	rc.mr, rc.pb, rc.pri = pk.ModelRoute, pk.Breaker, targetOf(pk.Primary)
	rc.once = pk.ModelRoute != nil && pk.ModelRoute.Config().NonIdempotent
	if pk.ModelRoute == nil {
		// A model without a route on an upstream with a breaker.
		a := rc.attempt(rc.ctx, rc.pri, attemptPrimary)
		rc.report(pk.Probe, a)
		if pk.Breaker.Model() == "" && verdictOf(pk.Breaker, a) == route.VerdictFailed {
			// Its first failure there gives it a breaker of its own:
			// model names are the client's, so only the ones the server
			// fails for become state.
			if b := p.router.DirectedBreaker(rc.pri.up, rc.model); b != pk.Breaker {
				b.RecordOwn(route.VerdictFailed)
			}
		}
		return p.reply(ss, a, monitor.RoutePrimary, "", rc.pri.up, o, nil)
	}
	if pk.HasFallback {
		fb := targetOf(pk.Fallback)
		rc.fb = &fb
	}
	switch pk.Route {
	case monitor.RouteFallback:
		return rc.viaFallback(ss, o, pk.Reason)
	case route.RouteCascadeMode:
		return rc.cascade(ss, o)
	}
	return rc.viaPrimary(ss, o, pk.Probe)
}

// viaFallback answers from the fallback.
func (c *routedCall) viaFallback(ss side, o outcome, reason string) outcome {
	a := c.tryFallback(c.ctx, reason)
	return c.fromFallback(ss, a, reason, o)
}

// fromFallback answers with the fallback's result a, counted for reason.
func (c *routedCall) fromFallback(ss side, a attemptResult, reason string, o outcome) outcome {
	c.mr.Live().Counters.Fallback.Add(1)
	c.mr.Live().Counters.FellBack(reason)
	return c.p.reply(ss, a, monitor.RouteFallback, reason, c.fb.up, o, &c.mr.Live().Counters)
}

// viaPrimary sends the call to the primary, hedged to the fallback when
// it is slow (hedge.go) and retried on the fallback when it failed and
// that is safe (retry.go), and answers. probe is the half-open probe's
// report, nil when closed.
func (c *routedCall) viaPrimary(ss side, o outcome, probe func(route.Verdict)) outcome {
	if c.fb != nil || c.pooledPrimary() {
		c.p.router.Budget().Deposit()
	}
	a, h, hedged := c.primary(probe)
	if h != nil && h.err == nil && (a.err != nil || a.resp == nil) {
		c.mr.Live().Counters.HedgesWon.Add(1)
		if h.endpointHedge {
			// Another replica of the primary answered: the primary's
			// answer, not a degraded one.
			c.mr.Live().Counters.Primary.Add(1)
			return c.p.reply(ss, *h, monitor.RoutePrimary, "", c.pri.up, o, &c.mr.Live().Counters)
		}
		return c.fromFallback(ss, *h, route.ReasonHedge, o)
	}
	if f, reason, ok := c.retry(a, hedged); ok {
		return c.fromFallback(ss, f, reason, o)
	}
	c.mr.Live().Counters.Primary.Add(1)
	return c.p.reply(ss, a, monitor.RoutePrimary, "", c.pri.up, o, &c.mr.Live().Counters)
}

// tryFallback sends the call to the fallback (why: the reason, for its
// trace span), through the fallback
// upstream's own breaker when it has one: while that is open the attempt
// fails at once, so a model whose primary and fallback are both down gets
// an explicit answer without waiting on either.
func (c *routedCall) tryFallback(ctx context.Context, why string) attemptResult {
	b := c.mr.FallbackBreaker()
	if b == nil {
		return c.attempt(ctx, *c.fb, why)
	}
	probe, ok := b.Admit()
	if !ok {
		return attemptResult{err: &route.BreakerOpenError{Upstream: c.fb.up.Name(), Model: c.model, Fallback: true}}
	}
	if probe != nil {
		defer probe(route.VerdictNone) // a no-op once reported
	}
	a := c.attempt(ctx, *c.fb, why)
	reportTo(b, ctx, c.clientDeadline, probe, a)
	return a
}

// report tells the primary's breaker how an attempt went (see reportTo).
func (c *routedCall) report(probe func(route.Verdict), a attemptResult) {
	reportTo(c.pb, c.ctx, c.clientDeadline, probe, a)
}

// reportTo tells a breaker how an attempt made with ctx went: the probe's
// report in the half-open state, the closed-state count otherwise. A call
// cancelled (by the client, or because another attempt answered) says
// nothing of the upstream, nor does a full batch queue. Nor does the
// client's own deadline running out (clientDeadline: ctx's deadline is
// the one the client sent), unless the attempt had already taken longer
// than the breaker's slow_call: a client that gives calls 2ms must not
// trip a healthy upstream's breaker and move everyone to the fallback,
// while one that hangs past slow_call still trips it.
func reportTo(b *route.Breaker, ctx context.Context, clientDeadline bool, probe func(route.Verdict), a attemptResult) {
	if b == nil {
		return
	}
	clientExpired := clientDeadline && clientDeadlineHit(ctx, a.err) &&
		!(b.Config().SlowCall > 0 && a.upstream > b.Config().SlowCall)
	if errors.Is(ctx.Err(), context.Canceled) || a.queueFull || clientExpired {
		if probe != nil {
			probe(route.VerdictNone)
		}
		return
	}
	v := verdictOf(b, a)
	if probe != nil {
		probe(v)
		return
	}
	b.Record(v)
}

// verdictOf is what an attempt says of its upstream and its model there:
// a failure code on the way to the server (it never answered: no
// response header, the connection refused, reset or going away) is the
// transport's; a failure code the server sent, or an answer slower than
// slow_call, is the model's. A deadline or cancellation is never the
// transport's: a slow model must not refuse its neighbours.
func verdictOf(b *route.Breaker, a attemptResult) route.Verdict {
	code := codeOf(a.err)
	if !b.IsFailure(code, a.upstream) {
		return route.VerdictOK
	}
	var up *upstreamError
	if errors.As(a.err, &up) && !up.fromUpstream && code != codes.DeadlineExceeded && code != codes.Canceled {
		return route.VerdictTransport
	}
	return route.VerdictFailed
}

// deadlineSlack is how close to the client's deadline an upstream's
// DEADLINE_EXCEEDED still counts as that deadline running out: the
// upstream enforces the deadline it was sent on its own clock and may
// answer a little before the proxy's timer fires.
const deadlineSlack = 5 * time.Millisecond

// clientDeadlineHit says whether an attempt with ctx (whose deadline is
// the client's) ended because that deadline ran out: ctx expired, or the
// upstream answered DEADLINE_EXCEEDED within deadlineSlack of it.
func clientDeadlineHit(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && codeOf(err) == codes.DeadlineExceeded && time.Until(dl) < deadlineSlack
}

// reportFailed counts a slow call of the model (one still unanswered at
// the hedge delay).
func (c *routedCall) reportFailed(probe func(route.Verdict)) {
	switch {
	case c.pb == nil:
	case probe != nil:
		probe(route.VerdictFailed)
	default:
		c.pb.Record(route.VerdictFailed)
	}
}
