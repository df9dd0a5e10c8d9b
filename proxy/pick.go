package proxy

import (
	"fmt"
	"github.com/infergate/infergate/proxy/route"
	"math"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/infergate/infergate/monitor"
)

// The route decision. A model's route is decided in one place, decide,
// from one table of precedence; Pick (for every unary call, batched or
// not, and every stream) and Status (for /api/v1/routes and the
// route-change log) both read it, so the response header, the metrics and
// the admin API cannot disagree on why a model's calls go where they go.
//
// Precedence, highest first:
//
//	forced   the operator's ForcePrimary or ForceFallback
//	breaker  the primary's breaker is open or half-open
//	alert    an alert's fallback action holds the model
//	slow     slow start: the breaker closed, calls come back gradually
//	cascade  a cascade route serves edge first
//	primary  the configured primary
//
// The breaker ranks above an alert because it knows more: an open breaker
// refuses the primary outright, while an alert still lets a probe through.

// target is where one attempt goes.
type target struct {
	up             *Upstream
	model, version string
	rewrite        bool // the request's model name and version are replaced
}

// decision is a model's route now.
type decision struct {
	// route is RoutePrimaryMode, RouteFallbackMode or RouteCascadeMode.
	route string
	// reason is what HeaderRouteReason says of a call the route sends to
	// the fallback (reasonForced, reasonBreaker, reasonAlert,
	// reasonSlowStart); "" on the configured route.
	reason string
	// why says the same for people: the admin API and the log.
	why string
}

// decide is the table of precedence above, for a model's route mr whose
// primary has the breaker pb (nil: none). It reads atomics and the
// immutable route; it never blocks and changes nothing.
func (mr *modelRoute) decide(pb *route.Breaker) decision {
	hasFallback := mr.cfg.Fallback != nil
	switch {
	case mr.forced == ForcePrimary:
		return decision{route: RoutePrimaryMode, why: "forced by the operator"}
	case mr.forced == ForceFallback && hasFallback:
		return decision{route: RouteFallbackMode, reason: reasonForced, why: "forced by the operator"}
	case pb != nil && pb.Gate() != BreakerClosed:
		why := "breaker of " + pb.GateName() + " " + pb.Gate().String()
		if !hasFallback {
			if pb.Gate() == BreakerOpen {
				why += ": calls fail at once (no fallback)"
			} else {
				why += ": probe calls only (no fallback)"
			}
			return decision{route: RoutePrimaryMode, reason: reasonBreaker, why: why}
		}
		if mr.fallbackOpen() {
			why += "; breaker of the fallback " + mr.fallback.GateName() + " open too: calls fail at once"
		}
		return decision{route: RouteFallbackMode, reason: reasonBreaker, why: why}
	case mr.alert != "" && hasFallback:
		return decision{route: RouteFallbackMode, reason: reasonAlert, why: "alert " + mr.alert + " firing"}
	case hasFallback && mr.cfg.Cascade == nil && pb != nil && pb.Share() < 1:
		return decision{route: RouteFallbackMode, reason: reasonSlowStart,
			why: fmt.Sprintf("slow start: %.0f%% of calls back on %s", 100*pb.Share(), pb.GateName())}
	case mr.cfg.Cascade != nil && hasFallback:
		return decision{route: RouteCascadeMode}
	}
	return decision{route: RoutePrimaryMode}
}

// fallbackTarget is where a model's fallback attempts go: the fallback's
// upstream (default: the primary's, pri) and model (default: the one the
// client named), the request readdressed. The one place a fallback is
// resolved, for calls, streams and the admin API.
func (mr *modelRoute) fallbackTarget(model string, pri *Upstream) target {
	fb := mr.cfg.Fallback
	t := target{up: fb.Upstream, model: fb.Model, version: fb.Version, rewrite: true}
	if t.up == nil {
		t.up = pri
	}
	if t.model == "" {
		t.model = model
	}
	return t
}

// primaryBreaker is the model's breaker on a route's primary when the
// director chose up: on the route's own upstream, or, for a route whose
// primary is the director's choice, on up (directedBreaker).
func (r *Router) primaryBreaker(mr *modelRoute, up *Upstream) *route.Breaker {
	if mr.primary != nil || mr.cfg.Upstream != nil {
		return mr.primary
	}
	return r.directedBreaker(up, mr.cfg.Model)
}

// maxDirected bounds the model breakers made on demand: model names come
// from clients. Past it, a model there has only its upstream's breaker (a
// dead server still fails its calls fast). A name longer than
// monitor.DefaultMaxLabelBytes, or not UTF-8, never gets one: it would
// become a label value.
const maxDirected = 1024

// knownBreaker is model's breaker on up if it has one already, else up's
// own (nil when up has none): it makes nothing.
func (r *Router) knownBreaker(up *Upstream, model string) *route.Breaker {
	t := r.table.Load()
	if b, ok := t.directed.Load(modelKey{up, model}); ok {
		return b.(*route.Breaker)
	}
	return t.breakers[up]
}

// directedBreaker is model's breaker on up, an upstream with a breaker,
// for a model the table has none for: a route's primary that is the
// Director's choice (made at its first call), a model without a route
// (made at its first failure there), with up's settings. nil when up has no breaker; up's own
// breaker for model "" and past maxDirected.
func (r *Router) directedBreaker(up *Upstream, model string) *route.Breaker {
	t := r.table.Load()
	conn := t.breakers[up]
	if conn == nil || model == "" || len(model) > monitor.DefaultMaxLabelBytes || !utf8.ValidString(model) {
		return conn
	}
	k := modelKey{up, model}
	if b, ok := t.directed.Load(k); ok {
		return b.(*route.Breaker)
	}
	if t.ndirected.Add(1) > maxDirected {
		t.ndirected.Add(-1)
		return conn
	}
	b, loaded := t.directed.LoadOrStore(k, newModelBreaker(k, conn, conn.Config(), r.opts.Now, r.breakerChanged))
	if loaded {
		t.ndirected.Add(-1)
	}
	return b.(*route.Breaker)
}

// pickInfo is what Pick knows of a call when it is routed.
type pickInfo struct {
	model  string
	stream bool
	// deadline is the call's deadline; zero for none.
	deadline time.Time
}

// Pick is where one call goes: its route, the targets its attempts may
// use, and what it reports back.
type Pick struct {
	// route is monitor.RoutePrimary, monitor.RouteFallback, or
	// RouteCascadeMode for a cascade (which answers cascade_edge or
	// cascade_escalated).
	route  string
	reason string
	// err refuses the call (a breaker open without a fallback, a shed);
	// nothing is sent.
	err error

	pri target
	// fb is the fallback target; valid when hasFallback. A call forced
	// onto its primary has none: no hedge, no retry.
	fb          target
	hasFallback bool

	mr *modelRoute    // nil: the model has no route
	pb *route.Breaker // the primary's breaker, nil if none
	// probe is the primary's half-open probe report; nil in the closed
	// state, where a verdict is recorded in the window instead.
	probe func(route.Verdict)
	// inFlight is the model's in-flight count the call holds; release
	// gives it back.
	inFlight *atomic.Int64
}

// plain says that Pick would send a unary call of model to up as it is and
// take nothing for it: no route for the model, no breaker on up. Such a
// call may take the fast path (fastpath.go), which reports no verdict.
func (r *Router) plain(up *Upstream, model string) bool {
	t := r.table.Load()
	return t.models[model] == nil && t.breakers[up] == nil
}

// idle says that Pick would send every call to up as it is: no model has
// a route and up has no breaker. A stream is then not held back to read
// its first message before it opens upstream.
func (r *Router) idle(up *Upstream) bool {
	t := r.table.Load()
	return len(t.models) == 0 && t.breakers[up] == nil
}

// Pick routes one call of a model the director sent to up. It never
// blocks and changes no route: what it takes for the call (a half-open
// probe's slot, a turn in the slow start or the alert's probes, a place
// under the model's in-flight cap) the call gives back through done and
// release.
func (r *Router) Pick(up *Upstream, info pickInfo) (pk Pick) {
	pk.route = monitor.RoutePrimary
	pk.pri = target{up: up}
	mr := r.table.Load().models[info.model]
	if mr == nil {
		// A model without a route on an upstream with a breaker: its
		// breaker there (made at its first failure, routeUnary), or the
		// upstream's, only fails its calls fast while open.
		if pk.pb = r.knownBreaker(up, info.model); pk.pb != nil {
			pk.admitPrimary(info.stream, "")
		}
		return pk
	}
	pk.mr = mr
	if mr.cfg.Upstream != nil {
		pk.pri.up = mr.cfg.Upstream
	}
	pk.pb = r.primaryBreaker(mr, up)
	if mr.cfg.Fallback != nil {
		pk.hasFallback = true
		pk.fb = mr.fallbackTarget(info.model, pk.pri.up)
	}
	if !info.stream && r.shed(&pk, info) {
		return pk
	}
	d := mr.decide(pk.pb)
	live := mr.live
	switch d.reason {
	case reasonForced:
		pk.toFallback(reasonForced)
		return pk
	case reasonBreaker:
		if info.stream {
			// A stream does not probe: it is long-lived and says little
			// of the upstream per call.
			if pk.pb.Gate() == BreakerOpen || pk.hasFallback {
				pk.refuseOrFallback(reasonBreaker)
			}
			return pk
		}
	case reasonAlert:
		if pe := r.opts.ProbeEvery; info.stream || pe <= 0 || live.calls.Add(1)%uint64(pe) != 0 {
			pk.toFallback(reasonAlert)
			return pk
		}
		// A probe for the alert: the primary, with hedging.
	case reasonSlowStart:
		// A growing share of calls returns to the primary, the rest
		// stays on the fallback (unless the fallback's own breaker is
		// open: the primary that just answered its probes beats a
		// refusal).
		if sh := pk.pb.Share(); sh < 1 && spread(live.ramp.Add(1)) >= sh && !pk.mr.fallbackOpen() {
			pk.toFallback(reasonSlowStart)
			return pk
		}
	}
	if mr.forced == ForcePrimary {
		pk.hasFallback = false // the operator wants the primary's answers only
		return pk
	}
	if d.route == RouteCascadeMode && !info.stream {
		pk.route = RouteCascadeMode
		return pk
	}
	pk.admitPrimary(info.stream, info.model)
	return pk
}

// admitPrimary asks the primary's breaker to let the call through: a
// probe's slot when half-open; the fallback, or a refusal, when it
// refuses. A stream only checks that the breaker is not open.
func (pk *Pick) admitPrimary(stream bool, model string) {
	if pk.pb == nil {
		return
	}
	if stream {
		if pk.pb.Gate() == BreakerOpen {
			pk.refuseOrFallback(reasonBreaker)
		}
		return
	}
	probe, ok := pk.pb.Admit()
	if !ok {
		pk.refuseOrFallback(reasonBreaker)
		return
	}
	pk.probe = probe
}

// refuseOrFallback sends the call to the fallback for reason, or, without
// one, refuses it.
func (pk *Pick) refuseOrFallback(reason string) {
	if pk.hasFallback {
		pk.toFallback(reason)
		return
	}
	model := ""
	if pk.mr != nil {
		model = pk.mr.cfg.Model
	}
	pk.err = &breakerOpenError{upstream: pk.pri.up.Name(), model: model}
}

// toFallback sends the call to the fallback for reason.
func (pk *Pick) toFallback(reason string) {
	pk.route, pk.reason = monitor.RouteFallback, reason
}

// shed applies the model's in-flight cap and deadline shedding; it
// reports whether the call was shed (to the fallback, or refused).
func (r *Router) shed(pk *Pick, info pickInfo) bool {
	cfg, live := pk.mr.cfg, pk.mr.live
	if cfg.MaxInFlight > 0 {
		pk.inFlight = &live.inFlight
		if n := live.inFlight.Add(1); n > int64(cfg.MaxInFlight) {
			pk.shedTo(reasonShedInFlight, fmt.Sprintf("model %s has %d calls in flight (its max_in_flight); try again later",
				cfg.Model, cfg.MaxInFlight))
			return true
		}
	}
	if cfg.ShedOnDeadline && !info.deadline.IsZero() {
		left := info.deadline.Sub(r.opts.Now())
		if p50 := time.Duration(live.p50.Load()); p50 > 0 && left < p50 {
			pk.shedTo(reasonShedDeadline, fmt.Sprintf("model %s: the call's deadline (%s left) is shorter than the model's median latency (%s)",
				cfg.Model, left.Round(time.Millisecond), p50.Round(time.Millisecond)))
			return true
		}
	}
	return false
}

// shedTo sends a shed call to the fallback, or refuses it.
func (pk *Pick) shedTo(reason, msg string) {
	if pk.hasFallback {
		pk.toFallback(reason)
		return
	}
	pk.err = &shedError{reason: reason, msg: msg}
}

// release gives back the call's place under the model's in-flight cap.
func (pk *Pick) release() {
	if pk.inFlight != nil {
		pk.inFlight.Add(-1)
	}
}

// done reports the primary attempt's verdict to the primary's breaker: the
// probe's report when half-open, the window's count when closed. A probe
// reports once; later calls do nothing.
func (pk *Pick) done(v route.Verdict) {
	switch {
	case pk.pb == nil:
	case pk.probe != nil:
		pk.probe(v)
	case v != route.VerdictNone:
		pk.pb.Record(v)
	}
}

// fallbackOpen says whether the fallback upstream's breaker keeps calls
// from it now (false without a route): no hedge or retry is worth a
// budget token then, and a call sent there fails at once.
func (mr *modelRoute) fallbackOpen() bool {
	return mr != nil && mr.fallback != nil && mr.fallback.Refusing()
}

// spread maps the n-th call to [0, 1) so that any run of consecutive
// calls covers the interval evenly (the golden-ratio sequence): a share s
// of calls is then s of every short stretch of them, not a block of
// primary calls followed by a block of fallback ones.
func spread(n uint64) float64 {
	const phi = 0.6180339887498949
	x := float64(n) * phi
	return x - math.Floor(x)
}
