package route

import (
	"fmt"
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

// Target is where one attempt goes.
type Target struct {
	Up             Upstream
	Model, Version string
	Rewrite        bool // the request's model name and version are replaced
}

// decision is a model's route now.
type decision struct {
	// route is RoutePrimaryMode, RouteFallbackMode or RouteCascadeMode.
	route string
	// reason is what HeaderRouteReason says of a call the route sends to
	// the fallback (ReasonForced, ReasonBreaker, ReasonAlert,
	// ReasonSlowStart); "" on the configured route.
	reason string
	// why says the same for people: the admin API and the log.
	why string
}

// decide is the table of precedence above, for a model's route mr whose
// primary has the breaker pb (nil: none). It reads atomics and the
// immutable route; it never blocks and changes nothing.
func (mr *ModelRoute) decide(pb *Breaker) decision {
	hasFallback := mr.cfg.Fallback != nil
	switch {
	case mr.forced == ForcePrimary:
		return decision{route: RoutePrimaryMode, why: "forced by the operator"}
	case mr.forced == ForceFallback && hasFallback:
		return decision{route: RouteFallbackMode, reason: ReasonForced, why: "forced by the operator"}
	case pb != nil && pb.Gate() != BreakerClosed:
		why := "breaker of " + pb.GateName() + " " + pb.Gate().String()
		if !hasFallback {
			if pb.Gate() == BreakerOpen {
				why += ": calls fail at once (no fallback)"
			} else {
				why += ": probe calls only (no fallback)"
			}
			return decision{route: RoutePrimaryMode, reason: ReasonBreaker, why: why}
		}
		if mr.FallbackOpen() {
			why += "; breaker of the fallback " + mr.fallback.GateName() + " open too: calls fail at once"
		}
		return decision{route: RouteFallbackMode, reason: ReasonBreaker, why: why}
	case mr.alert != "" && hasFallback:
		return decision{route: RouteFallbackMode, reason: ReasonAlert, why: "alert " + mr.alert + " firing"}
	case hasFallback && mr.cfg.Cascade == nil && pb != nil && pb.Share() < 1:
		return decision{route: RouteFallbackMode, reason: ReasonSlowStart,
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
func (mr *ModelRoute) fallbackTarget(model string, pri Upstream) Target {
	fb := mr.cfg.Fallback
	t := Target{Up: fb.Upstream, Model: fb.Model, Version: fb.Version, Rewrite: true}
	if t.Up == nil {
		t.Up = pri
	}
	if t.Model == "" {
		t.Model = model
	}
	return t
}

// primaryBreaker is the model's breaker on a route's primary when the
// director chose up: on the route's own upstream, or, for a route whose
// primary is the director's choice, on up (DirectedBreaker).
func (r *Router) primaryBreaker(mr *ModelRoute, up Upstream) *Breaker {
	if mr.primary != nil || mr.cfg.Upstream != nil {
		return mr.primary
	}
	return r.DirectedBreaker(up, mr.cfg.Model)
}

// maxDirected bounds the model breakers made on demand: model names come
// from clients. Past it, a model there has only its upstream's breaker (a
// dead server still fails its calls fast). A name longer than
// monitor.DefaultMaxLabelBytes, or not UTF-8, never gets one: it would
// become a label value.
const maxDirected = 1024

// knownBreaker is model's breaker on up if it has one already, else up's
// own (nil when up has none): it makes nothing.
func (r *Router) knownBreaker(up Upstream, model string) *Breaker {
	t := r.table.Load()
	if b, ok := t.directed.Load(modelKey{up, model}); ok {
		return b.(*Breaker)
	}
	return t.breakers[up]
}

// DirectedBreaker is model's breaker on up, an upstream with a breaker,
// for a model the table has none for: a route's primary that is the
// Director's choice (made at its first call), a model without a route
// (made at its first failure there), with up's settings. nil when up has no breaker; up's own
// breaker for model "" and past maxDirected.
func (r *Router) DirectedBreaker(up Upstream, model string) *Breaker {
	t := r.table.Load()
	conn := t.breakers[up]
	if conn == nil || model == "" || len(model) > monitor.DefaultMaxLabelBytes || !utf8.ValidString(model) {
		return conn
	}
	k := modelKey{up, model}
	if b, ok := t.directed.Load(k); ok {
		return b.(*Breaker)
	}
	if t.ndirected.Add(1) > maxDirected {
		t.ndirected.Add(-1)
		return conn
	}
	b, loaded := t.directed.LoadOrStore(k, newModelBreaker(k, conn, conn.Config(), r.opts.Now, r.breakerChanged))
	if loaded {
		t.ndirected.Add(-1)
	}
	return b.(*Breaker)
}

// PickInfo is what Pick knows of a call when it is routed.
type PickInfo struct {
	Model  string
	Stream bool
	// Deadline is the call's deadline; zero for none.
	Deadline time.Time
}

// Pick is where one call goes: its route, the targets its attempts may
// use, and what it reports back.
type Pick struct {
	// Route is monitor.RoutePrimary, monitor.RouteFallback, or
	// RouteCascadeMode for a cascade (which answers cascade_edge or
	// cascade_escalated).
	Route  string
	Reason string
	// Err refuses the call (a breaker open without a fallback, a shed);
	// nothing is sent.
	Err error

	Primary Target
	// Fallback is the fallback target; valid when HasFallback. A call
	// forced onto its primary has none: no hedge, no retry.
	Fallback    Target
	HasFallback bool

	ModelRoute *ModelRoute // nil: the model has no route
	Breaker    *Breaker    // the primary's breaker, nil if none
	// Probe is the primary's half-open probe report; nil in the closed
	// state, where a verdict is recorded in the window instead.
	Probe func(Verdict)
	// inFlight is the model's in-flight count the call holds; Release
	// gives it back.
	inFlight *atomic.Int64
}

// Plain says that Pick would send a unary call of model to up as it is and
// take nothing for it: no route for the model, no breaker on up. Such a
// call may take the proxy's fast path, which reports no verdict.
func (r *Router) Plain(up Upstream, model string) bool {
	t := r.table.Load()
	return t.models[model] == nil && t.breakers[up] == nil
}

// Idle says that Pick would send every call to up as it is: no model has
// a route and up has no breaker. A stream is then not held back to read
// its first message before it opens upstream.
func (r *Router) Idle(up Upstream) bool {
	t := r.table.Load()
	return len(t.models) == 0 && t.breakers[up] == nil
}

// Pick routes one call of a model the director sent to up. It never
// blocks and changes no route: what it takes for the call (a half-open
// probe's slot, a turn in the slow start or the alert's probes, a place
// under the model's in-flight cap) the call gives back through Done and
// Release.
func (r *Router) Pick(up Upstream, info PickInfo) (pk Pick) {
	pk.Route = monitor.RoutePrimary
	pk.Primary = Target{Up: up}
	mr := r.table.Load().models[info.Model]
	if mr == nil {
		// A model without a route on an upstream with a breaker: its
		// breaker there (made at its first failure, by the proxy), or the
		// upstream's, only fails its calls fast while open.
		if pk.Breaker = r.knownBreaker(up, info.Model); pk.Breaker != nil {
			pk.admitPrimary(info.Stream, "")
		}
		return pk
	}
	pk.ModelRoute = mr
	if mr.cfg.Upstream != nil {
		pk.Primary.Up = mr.cfg.Upstream
	}
	pk.Breaker = r.primaryBreaker(mr, up)
	if mr.cfg.Fallback != nil {
		pk.HasFallback = true
		pk.Fallback = mr.fallbackTarget(info.Model, pk.Primary.Up)
	}
	if !info.Stream && r.shed(&pk, info) {
		return pk
	}
	d := mr.decide(pk.Breaker)
	live := mr.live
	switch d.reason {
	case ReasonForced:
		pk.toFallback(ReasonForced)
		return pk
	case ReasonBreaker:
		if info.Stream {
			// A stream does not probe: it is long-lived and says little
			// of the upstream per call.
			if pk.Breaker.Gate() == BreakerOpen || pk.HasFallback {
				pk.refuseOrFallback(ReasonBreaker)
			}
			return pk
		}
	case ReasonAlert:
		if pe := r.opts.ProbeEvery; info.Stream || pe <= 0 || live.calls.Add(1)%uint64(pe) != 0 {
			pk.toFallback(ReasonAlert)
			return pk
		}
		// A probe for the alert: the primary, with hedging.
	case ReasonSlowStart:
		// A growing share of calls returns to the primary, the rest
		// stays on the fallback (unless the fallback's own breaker is
		// open: the primary that just answered its probes beats a
		// refusal).
		if sh := pk.Breaker.Share(); sh < 1 && spread(live.ramp.Add(1)) >= sh && !pk.ModelRoute.FallbackOpen() {
			pk.toFallback(ReasonSlowStart)
			return pk
		}
	}
	if mr.forced == ForcePrimary {
		pk.HasFallback = false // the operator wants the primary's answers only
		return pk
	}
	if d.route == RouteCascadeMode && !info.Stream {
		pk.Route = RouteCascadeMode
		return pk
	}
	pk.admitPrimary(info.Stream, info.Model)
	return pk
}

// admitPrimary asks the primary's breaker to let the call through: a
// probe's slot when half-open; the fallback, or a refusal, when it
// refuses. A stream only checks that the breaker is not open.
func (pk *Pick) admitPrimary(stream bool, model string) {
	if pk.Breaker == nil {
		return
	}
	if stream {
		if pk.Breaker.Gate() == BreakerOpen {
			pk.refuseOrFallback(ReasonBreaker)
		}
		return
	}
	probe, ok := pk.Breaker.Admit()
	if !ok {
		pk.refuseOrFallback(ReasonBreaker)
		return
	}
	pk.Probe = probe
}

// refuseOrFallback sends the call to the fallback for reason, or, without
// one, refuses it.
func (pk *Pick) refuseOrFallback(reason string) {
	if pk.HasFallback {
		pk.toFallback(reason)
		return
	}
	model := ""
	if pk.ModelRoute != nil {
		model = pk.ModelRoute.cfg.Model
	}
	pk.Err = &BreakerOpenError{Upstream: pk.Primary.Up.Name(), Model: model}
}

// toFallback sends the call to the fallback for reason.
func (pk *Pick) toFallback(reason string) {
	pk.Route, pk.Reason = monitor.RouteFallback, reason
}

// shed applies the model's in-flight cap and deadline shedding; it
// reports whether the call was shed (to the fallback, or refused).
func (r *Router) shed(pk *Pick, info PickInfo) bool {
	cfg, live := pk.ModelRoute.cfg, pk.ModelRoute.live
	if cfg.MaxInFlight > 0 {
		pk.inFlight = &live.inFlight
		if n := live.inFlight.Add(1); n > int64(cfg.MaxInFlight) {
			pk.shedTo(ReasonShedInFlight, fmt.Sprintf("model %s has %d calls in flight (its max_in_flight); try again later",
				cfg.Model, cfg.MaxInFlight))
			return true
		}
	}
	if cfg.ShedOnDeadline && !info.Deadline.IsZero() {
		left := info.Deadline.Sub(r.opts.Now())
		if p50 := time.Duration(live.p50.Load()); p50 > 0 && left < p50 {
			pk.shedTo(ReasonShedDeadline, fmt.Sprintf("model %s: the call's deadline (%s left) is shorter than the model's median latency (%s)",
				cfg.Model, left.Round(time.Millisecond), p50.Round(time.Millisecond)))
			return true
		}
	}
	return false
}

// shedTo sends a shed call to the fallback, or refuses it.
func (pk *Pick) shedTo(reason, msg string) {
	if pk.HasFallback {
		pk.toFallback(reason)
		return
	}
	pk.Err = &ShedError{Reason: reason, Msg: msg}
}

// Release gives back the call's place under the model's in-flight cap.
func (pk *Pick) Release() {
	if pk.inFlight != nil {
		pk.inFlight.Add(-1)
	}
}

// Done reports the primary attempt's verdict to the primary's breaker: the
// probe's report when half-open, the window's count when closed. A probe
// reports once; later calls do nothing.
func (pk *Pick) Done(v Verdict) {
	switch {
	case pk.Breaker == nil:
	case pk.Probe != nil:
		pk.Probe(v)
	case v != VerdictNone:
		pk.Breaker.Record(v)
	}
}

// FallbackOpen says whether the fallback upstream's breaker keeps calls
// from it now (false without a route): no hedge or retry is worth a
// budget token then, and a call sent there fails at once.
func (mr *ModelRoute) FallbackOpen() bool {
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
