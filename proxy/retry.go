package proxy

import (
	"slices"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/route"
)

// Retries: a call that failed on the primary before or without an answer
// is tried once more on the fallback, from the retry budget, when that is
// safe (an idempotent model, a failure of the upstream and not of the
// request). A full batch queue sends the call to the fallback whatever
// the model says: nothing reached the upstream.

// retry tries a failed primary attempt a again on the fallback. ok reports
// the fallback's answer f to reply with, and the reason.
func (c *routedCall) retry(a attemptResult, hedged bool) (f attemptResult, reason string, ok bool) {
	if a.err == nil || c.fb == nil || c.ctx.Err() != nil {
		return f, "", false
	}
	switch {
	case a.queueFull:
		reason = route.ReasonShedQueueFull
	case c.mr.Config().NonIdempotent || hedged || !c.retryable(a):
		return f, "", false
	case c.mr.FallbackOpen() || !c.p.router.Budget().Take():
		return f, "", false
	default:
		reason = route.ReasonRetry
		c.mr.Live().Counters.Retries.Add(1)
	}
	f = c.tryFallback(c.ctx, reason)
	if f.err != nil {
		return f, "", false
	}
	if reason == route.ReasonRetry {
		c.mr.Live().Counters.RetriesWon.Add(1)
	}
	f.upstream += a.upstream
	return f, reason, true
}

// retryable says whether a failed primary attempt may be tried again on
// the fallback: the upstream failed (a failure code), not the request.
func (c *routedCall) retryable(a attemptResult) bool {
	code := codeOf(a.err)
	if c.pb != nil {
		return c.pb.IsFailure(code, 0)
	}
	return slices.Contains(DefaultFailureCodes, code)
}

// retryStream is the fallback route of a stream whose primary stream could
// not be opened with UNAVAILABLE (connection refused, no connection: the
// first frame never left): the failure counts for the primary's breaker,
// and the stream goes to the fallback from the retry budget, as a unary
// call that failed before reaching the upstream would.
func (p *Proxy) retryStream(sr streamRoute, mr *route.ModelRoute, pb *route.Breaker, fb target, kind wire.TargetKind, openErr error) (streamRoute, bool) {
	if codeOf(openErr) != codes.Unavailable {
		return sr, false
	}
	if pb != nil && pb.Gate() == BreakerClosed {
		pb.Record(route.VerdictTransport) // the stream never reached the server
	}
	if mr.Config().NonIdempotent || mr.FallbackOpen() || !p.router.Budget().Take() {
		return sr, false
	}
	mr.Live().Counters.Retries.Add(1)
	return fallbackStream(sr, mr, fb, kind, route.ReasonRetry), true
}
