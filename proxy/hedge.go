package proxy

import (
	"context"
	"errors"
	"github.com/infergate/infergate/proxy/route"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/wire"
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
	if after > 0 && (c.fb != nil || c.pooledPrimary()) && !c.mr.cfg.NonIdempotent {
		a, h = c.hedge(probe, after, slow)
		return a, h, h != nil
	}
	a = c.askPrimary(c.ctx, nil)
	c.report(probe, a)
	return a, nil, false
}

// askPrimary makes the call's attempt on the primary with ctx (ex as in
// attemptWith), noting when it was sent and whether the primary answered
// it, the primary's silence that a hang shows (silentFor).
func (c *routedCall) askPrimary(ctx context.Context, ex *exchange) attemptResult {
	live := c.mr.live
	live.sent(c.p.router.opts.Now().UnixNano())
	a := c.attemptWith(ctx, c.pri, attemptPrimary, ex)
	if answeredBy(a) {
		live.answered()
	}
	return a
}

// hangDelays is how many of a call's hedge delays the primary must have
// answered nothing of a model while calls were sent to it for that call,
// still unanswered at its delay, to be evidence of a hang on its own:
// whatever tail was learnt, and however young it is. A cold start whose
// first calls are slow is answered within a few delays, and one slow call
// among answered ones says nothing; a hang answers none.
const hangDelays = 3

// sent notes that a call was sent to the primary at now (unix
// nanoseconds): the start of its silence unless it answered since.
func (l *routeLive) sent(now int64) {
	if l.waiting.Load() == 0 {
		l.waiting.CompareAndSwap(0, now)
	}
}

// answered notes an answer of the primary: its silence is over.
func (l *routeLive) answered() {
	if l.waiting.Load() != 0 {
		l.waiting.Store(0)
	}
}

// silentFor says whether the primary has answered nothing of the model
// for at least d by now (unix nanoseconds), while calls were sent to it:
// the first call sent since its last answer went at least d ago.
func (l *routeLive) silentFor(now int64, d time.Duration) bool {
	w := l.waiting.Load()
	return w != 0 && now-w >= int64(d)
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

// patience is how long the primary gets before the fallback is asked (a
// hedge) or a cascade answers with the edge's answer it holds: the hedge
// delay, and no later than half of what the call's deadline leaves; 0 for
// no limit. slow says whether the primary still unanswered then counts as
// a slow call for its breaker whatever else it did: a hedge is evidence
// only once its delay is. A configured delay is the operator's word; an
// automatic one, or one judged against the primary's tail, only once the
// tail has enough calls behind it (tailKnown): at a cold start a p99.9
// learnt from a few dozen calls would trip the breaker of a healthy
// primary. A hang is evidence whatever the delay (see hedge).
func (c *routedCall) patience() (after time.Duration, slow bool) {
	after = c.mr.hedgeAfter() // 0: off, or automatic with the tail unknown
	auto := c.mr.cfg.HedgeAfter == 0
	known := c.mr.live.tailKnown()
	slow = !auto || known
	if dl, ok := c.ctx.Deadline(); ok && c.mr.cfg.HedgeAfter >= 0 {
		// The fallback needs time to answer: no later than half of what
		// the deadline leaves; with the tail unknown, that is the
		// automatic delay (a primary hung from the start is then hedged
		// before the callers' deadlines, though not counted slow: its
		// callers are answered, and its breaker waits for evidence).
		// Shorter than the model's delay, it shows the primary slow only
		// past the slowest of its healthy calls (its p99.9, once known).
		// An automatic delay never ends before that: it would replace
		// healthy answers that were still on time.
		if left := dl.Sub(c.p.router.opts.Now()) / 2; left > 0 && (after == 0 || left < after) {
			tail := time.Duration(c.mr.live.tail.Load())
			after = left
			if auto {
				after = max(after, tail)
			}
			slow = known && tail > 0 && after > tail
		}
	}
	return after, slow
}

// minHedgeAfter is the least automatic hedge delay.
const minHedgeAfter = 10 * time.Millisecond

// hedgeAfter is the model's hedge delay: configured, or three times the
// primary's recent p99.9 (see censoredTail), at least 10ms, or 0 while
// that is unknown (then only a call's deadline sets one: see patience).
// Not capped: a model whose healthy calls take minutes is hedged only
// past its own tail, and a call's deadline bounds the delay.
func (mr *modelRoute) hedgeAfter() time.Duration {
	d := mr.cfg.HedgeAfter
	if d != 0 {
		return d
	}
	if tail := time.Duration(mr.live.tail.Load()); tail > 0 {
		return max(3*tail, minHedgeAfter)
	}
	return 0
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
		if avoid == nil && (c.fb == nil || c.mr.fallbackOpen()) {
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
		if !c.p.router.table.Load().budget.Take() {
			hedged <- nil
			return
		}
		c.mr.live.counters.hedges.Add(1)
		var h attemptResult
		if avoid != nil {
			h = c.attemptWith(hctx, c.pri, reasonHedge, &exchange{avoid: avoid})
			h.endpointHedge = true
		} else {
			h = c.tryFallback(hctx, reasonHedge)
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

// hung says whether the primary has been silent for the model for
// hangDelays of the call's hedge delay after.
func (c *routedCall) hung(after time.Duration) bool {
	return c.mr.live.silentFor(c.p.router.opts.Now().UnixNano(), hangDelays*after)
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
