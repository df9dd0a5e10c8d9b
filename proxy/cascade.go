package proxy

import (
	"context"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/route"
)

// Cascade: edge first. The fallback (edge) model answers; an answer below
// the confidence threshold, or an edge failure, goes to the primary.

// cascade serves edge first: the fallback answers, and an answer below the
// confidence threshold goes to the primary.
func (c *routedCall) cascade(ss side, o outcome) outcome {
	live := c.mr.Live()
	cc := c.mr.Config().Cascade
	e := c.tryFallback(c.ctx, reasonCascadeEdge)
	reason := route.ReasonEdgeFailed
	if e.err == nil {
		conf, err := confidence(c.kind, e.resp, cc.Output)
		if err == nil && conf >= cc.Threshold {
			live.Counters.CascadeEdge.Add(1)
			return c.p.reply(ss, e, monitor.RouteCascadeEdge, route.ReasonConfident, c.fb.up, o, &live.Counters)
		}
		reason = route.ReasonLowConfidence
	}
	var report func(route.Verdict)
	ok, cut := true, false
	if c.pb != nil {
		report, ok = c.pb.Admit()
	}
	if report != nil {
		defer report(route.VerdictNone) // a no-op once reported
	}
	if ok {
		var a attemptResult
		a, cut = c.escalate(report, e.err == nil)
		if a.err == nil || e.err != nil {
			live.Counters.CascadeEscalated.Add(1)
			a.upstream += e.upstream
			return c.p.reply(ss, a, monitor.RouteCascadeEscalated, reason, c.pri.up, o, &c.mr.Live().Counters)
		}
	}
	// The primary cannot help: the edge's answer, however unsure, beats
	// an error.
	reason = route.ReasonPrimaryFailed
	if cut {
		reason = route.ReasonPrimarySlow
	}
	live.Counters.CascadeEdge.Add(1)
	return c.p.reply(ss, e, monitor.RouteCascadeEdge, reason, c.fb.up, o, &c.mr.Live().Counters)
}

// escalate sends a cascade's call to the primary. With the edge's answer
// in hand (held), the primary gets the model's patience, not the whole
// deadline: a hung primary would otherwise make the caller miss the
// answer the proxy already has. Cut off there (cut), the primary counts as
// slow for its breaker as a hedged call would.
func (c *routedCall) escalate(report func(route.Verdict), held bool) (a attemptResult, cut bool) {
	var after time.Duration
	slow := false
	if held {
		after, slow = c.patience()
	}
	if after <= 0 {
		a = c.attempt(c.ctx, c.pri, reasonEscalation)
		c.report(report, a)
		return a, false
	}
	cutAt := c.p.router.Now().Add(after)
	ctx, cancel := context.WithDeadline(c.ctx, cutAt)
	defer cancel()
	a = c.attempt(ctx, c.pri, reasonEscalation)
	// The clock, not ctx.Err(), says whether the patience ran out: the
	// primary got the deadline too and its DEADLINE_EXCEEDED can arrive
	// before the context's timer fires.
	if a.err == nil || c.ctx.Err() != nil || c.p.router.Now().Before(cutAt) {
		c.report(report, a)
		return a, false
	}
	switch {
	case slow:
		c.reportFailed(report)
	case report != nil:
		report(route.VerdictNone) // cut before its tail: says nothing
	}
	return a, true
}

// confidence reads the edge answer's confidence from its output tensor.
func confidence(kind wire.TargetKind, resp *Frame, output string) (float64, error) {
	if kind == wire.TFServingTarget {
		return wire.PredictConfidence(resp.Bytes(), output)
	}
	return wire.ModelInferConfidence(resp.Bytes(), output)
}
