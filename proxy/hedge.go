package proxy

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/route"
)

// Hedging: a primary still unanswered after the model's patience is asked
// again, and the first good answer wins: of another endpoint of the
// primary's pool when it has one that may take it (the same model, so
// the answer is not degraded, and one slow replica is routed around
// before the fallback tier), else of the fallback.

// testHookHedge, when set by a test, runs as a hedge starts.
var testHookHedge func()

// primary makes the call's attempt on the primary: hedged when the model
// has a patience, a fallback and an idempotent call, plain otherwise. It
// returns the primary's result, the hedge's (nil when none was sent), and
// whether the call was hedged (then it is not retried: the hedge was its
// second try).
func (c *routedCall) primary(probe func(route.Verdict)) (a attemptResult, h *attemptResult, hedged bool) {
	after, slow := c.patience()
	if after > 0 && (c.fb != nil || c.pooledPrimary()) && !c.mr.Config().NonIdempotent {
		a, h = c.hedge(probe, after, slow)
		return a, h, h != nil
	}
	a = c.askPrimary(c.ctx, nil)
	c.report(probe, a)
	return a, nil, false
}

// askPrimary makes the call's attempt on the primary with ctx (ex as in
// attemptWith), noting when it was sent and whether the primary answered
// it, the primary's silence that a hang shows (route.Live.Hung).
func (c *routedCall) askPrimary(ctx context.Context, ex *exchange) attemptResult {
	live := c.mr.Live()
	live.Sent(c.p.router.Now().UnixNano())
	a := c.attemptWith(ctx, c.pri, attemptPrimary, ex)
	if answeredBy(a) {
		live.Answered()
	}
	return a
}

// answeredBy says whether the primary answered attempt a: a response, or
// a status its server sent other than DEADLINE_EXCEEDED (an answer that
// came too late is none). A call cancelled or out of time, or one the way
// to the server failed, got no answer.
func answeredBy(a attemptResult) bool {
	if a.err == nil {
		return a.resp != nil
	}
	var up *upstreamError
	return errors.As(a.err, &up) && up.fromUpstream && codeOf(a.err) != codes.DeadlineExceeded
}

// hedge calls the primary and, if it has not answered after the delay,
// the fallback too (from the budget). It returns the primary's answer and
// the hedge's (nil when none was sent). A primary still unanswered at the
// delay counts as a slow call for its breaker at that moment when the
// delay is evidence (slow), or when the primary has answered nothing of
// the model for hangDelays delays while calls were sent to it (a hang, at
// any delay, whatever tail was learnt); and so does one still unanswered
// when a hedge to the fallback wins, if it has been silent that long by
// then. So a hung upstream trips its breaker within a few delays, not at
// the callers' deadlines, and the hedges the budget affords (a fraction
// of the calls) cover the calls until it does.
func (c *routedCall) hedge(report func(route.Verdict), after time.Duration, slow bool) (attemptResult, *attemptResult) {
	pctx, pcancel := context.WithCancel(c.ctx)
	defer pcancel()
	hctx, hcancel := context.WithCancel(c.ctx)
	defer hcancel()
	var reported atomic.Bool
	hedged := make(chan *attemptResult, 1)
	timer := time.AfterFunc(after, func() {
		// This goroutine is not the handler's: the handler's recovery
		// (handle) does not see it. A panic fails the hedge only.
		defer func() {
			if v := recover(); v != nil {
				err := c.p.panicked(c.ctx, v, "hedge")
				hedged <- &attemptResult{err: err}
			}
		}()
		if testHookHedge != nil {
			testHookHedge()
		}
		// hctx ended: the primary answered as the timer fired; no hedge,
		// no budget spent.
		if c.ctx.Err() != nil || hctx.Err() != nil {
			hedged <- nil
			return
		}
		avoid := c.poolHedgeAvoids()
		if avoid == nil && (c.fb == nil || c.mr.FallbackOpen()) {
			hedged <- nil
			return
		}
		// Slow whether or not the budget affords a hedge: when hedges
		// run out (a slowdown under load), the calls still waiting on
		// the primary are the ones that must trip its breaker. Not when
		// the fallback is down too: tripping would fail slow calls that
		// are still being answered. Not when another replica can take
		// it: one slow replica is the pool's to route around (its
		// latency and ejection), not the whole upstream's breaker's.
		if avoid == nil && (slow || c.hung(after)) && reported.CompareAndSwap(false, true) {
			c.reportFailed(report)
		}
		if !c.p.router.Budget().Take() {
			hedged <- nil
			return
		}
		c.mr.Live().Counters.Hedges.Add(1)
		var h attemptResult
		if avoid != nil {
			h = c.attemptWith(hctx, c.pri, route.ReasonHedge, &exchange{avoid: avoid})
			h.endpointHedge = true
		} else {
			h = c.tryFallback(hctx, route.ReasonHedge)
		}
		if h.err == nil {
			pcancel() // the hedge answered: stop waiting for the primary
		}
		hedged <- &h
	})
	a := c.askPrimary(pctx, &exchange{picked: &c.priEp})
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
		if h != nil && h.err == nil && !h.endpointHedge && !answeredBy(a) && c.hung(after) {
			// The fallback answered, the primary still has not, nor
			// anything else for hangDelays delays: a hang.
			c.reportFailed(report)
		} else {
			// A primary call cancelled because the hedge answered says
			// nothing more of the primary.
			reportTo(c.pb, pctx, c.clientDeadline, report, a)
		}
	}
	return a, h
}

// hung says whether the primary has been silent for the model long
// enough at the call's hedge delay after to be a hang (route.Live.Hung).
func (c *routedCall) hung(after time.Duration) bool {
	return c.mr.Live().Hung(c.p.router.Now().UnixNano(), after)
}

// patience is the primary's patience for this call (Router.Patience).
func (c *routedCall) patience() (after time.Duration, slow bool) {
	dl, _ := c.ctx.Deadline()
	return c.p.router.Patience(c.mr, dl)
}

// pooledPrimary says whether the primary is a pool of endpoints.
func (c *routedCall) pooledPrimary() bool { return c.pri.up.Len() > 1 }

// poolHedgeAvoids is the endpoint of the primary's pool the hedge leaves
// out (the primary's own) when another may take the call; nil when the
// hedge goes to the fallback: no pool, no other endpoint usable for the
// model, a batched model (its batches pick their own endpoint), the
// primary's endpoint not yet picked, or a call of a sequence (its state
// is on its own replica: sent twice, the sequence would advance twice).
func (c *routedCall) poolHedgeAvoids() *Endpoint {
	pe := c.priEp.Load()
	if pe == nil || !c.pooledPrimary() {
		return nil
	}
	model := c.model
	if c.pri.rewrite {
		model = c.pri.model
	}
	if b := c.p.batcher; b != nil && b.Handles(c.method, model) {
		return nil
	}
	if c.method == methods.ModelInfer && wire.SequenceOf(c.req.Bytes()).ID != "" {
		return nil
	}
	now := c.p.now().UnixNano()
	if e := c.pri.up.Pick(now, model, pe); e == pe || !e.UsableFor(model, now) {
		return nil
	}
	return pe
}
