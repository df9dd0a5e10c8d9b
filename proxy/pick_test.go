package proxy

import (
	"github.com/infergate/infergate/proxy/route"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The precedence of decide, one row per state: forced > breaker > alert >
// slow start > cascade > primary.
func TestDecidePrecedence(t *testing.T) {
	open := route.NewBreaker("pri", "", BreakerConfig{}, time.Now, nil)
	open.Changed(BreakerClosed, BreakerOpen)
	closed := route.NewBreaker("pri", "", BreakerConfig{}, time.Now, nil)
	ramping := route.NewBreaker("pri", "", BreakerConfig{SlowStart: time.Hour}, time.Now, nil)
	ramping.Changed(BreakerHalfOpen, BreakerClosed)
	fb := &FallbackTarget{Model: "small"}
	cases := []struct {
		name          string
		forced, alert string
		fallback      bool
		cascade       bool
		pb            *route.Breaker
		route, reason string
	}{
		{"healthy", ForceAuto, "", true, false, closed, RoutePrimaryMode, ""},
		{"no breaker", ForceAuto, "", true, false, nil, RoutePrimaryMode, ""},
		{"forced primary beats an open breaker", ForcePrimary, "A", true, false, open, RoutePrimaryMode, ""},
		{"forced fallback beats an open breaker", ForceFallback, "A", true, false, open, RouteFallbackMode, reasonForced},
		{"breaker open", ForceAuto, "", true, false, open, RouteFallbackMode, reasonBreaker},
		{"breaker open and alert firing", ForceAuto, "A", true, false, open, RouteFallbackMode, reasonBreaker},
		{"breaker open, no fallback", ForceAuto, "", false, false, open, RoutePrimaryMode, reasonBreaker},
		{"alert firing", ForceAuto, "A", true, false, closed, RouteFallbackMode, reasonAlert},
		{"alert firing, no fallback", ForceAuto, "A", false, false, closed, RoutePrimaryMode, ""},
		{"alert beats slow start", ForceAuto, "A", true, false, ramping, RouteFallbackMode, reasonAlert},
		{"slow start", ForceAuto, "", true, false, ramping, RouteFallbackMode, reasonSlowStart},
		{"cascade ignores slow start", ForceAuto, "", true, true, ramping, RouteCascadeMode, ""},
		{"cascade", ForceAuto, "", true, true, closed, RouteCascadeMode, ""},
		{"cascade, breaker open", ForceAuto, "", true, true, open, RouteFallbackMode, reasonBreaker},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := &RouteConfig{Model: "big"}
			if tc.fallback {
				rc.Fallback = fb
			}
			if tc.cascade {
				rc.Cascade = &CascadeConfig{Output: "probs", Threshold: 0.5}
			}
			mr := &modelRoute{cfg: rc, forced: tc.forced, alert: tc.alert, live: &routeLive{}}
			d := mr.decide(tc.pb)
			if d.route != tc.route || d.reason != tc.reason {
				t.Errorf("decide = %s/%q, want %s/%q (why %q)", d.route, d.reason, tc.route, tc.reason, d.why)
			}
		})
	}
}

// The reason a call's header gives equals the reason /api/v1/routes
// gives, in every state a route can be in.
func TestRouteHeaderAgreesWithStatus(t *testing.T) {
	alert := map[string]string{"alertname": "Slow", "model": "big"}
	agree := func(t *testing.T, e *routeEnv, want string) {
		t.Helper()
		got := e.call(t, time.Second).reason
		if routes, _ := e.router.Status(); got != want || routes[0].Reason != want {
			t.Errorf("the header says %q, the status %q; want both %q", got, routes[0].Reason, want)
		}
	}
	t.Run("forced", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRouteEnv(t, nil)
			if err := e.router.SetForced("big", ForceFallback); err != nil {
				t.Fatal(err)
			}
			agree(t, e, reasonForced)
		})
	})
	t.Run("breaker open", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRouteEnv(t, nil)
			e.pri.set(behaveError)
			e.tripPrimary(t)
			agree(t, e, reasonBreaker)
		})
	})
	t.Run("alert firing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRouteEnv(t, func(_ *RouteConfig, ro *RouterOptions, _ *BreakerConfig) { ro.ProbeEvery = -1 })
			if _, err := e.router.Start("fallback", alert); err != nil {
				t.Fatal(err)
			}
			agree(t, e, reasonAlert)
		})
	})
	t.Run("alert firing and breaker open", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRouteEnv(t, func(_ *RouteConfig, ro *RouterOptions, _ *BreakerConfig) { ro.ProbeEvery = -1 })
			e.pri.set(behaveError)
			e.tripPrimary(t)
			agree(t, e, reasonBreaker)
			if _, err := e.router.Start("fallback", alert); err != nil {
				t.Fatal(err)
			}
			agree(t, e, reasonBreaker)
		})
	})
	t.Run("slow start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRouteEnv(t, func(_ *RouteConfig, _ *RouterOptions, bc *BreakerConfig) { bc.SlowStart = time.Minute })
			e.pri.set(behaveError)
			e.tripPrimary(t)
			agree(t, e, reasonBreaker)
			e.pri.set(behaveOK)
			e.outwaitOpenTime()
			e.callUntil(t, "the healed primary's probes to close its breaker", 5, func(result) bool {
				return e.breakerStatus(t, "primary").State == BreakerClosed.String()
			})
			agree(t, e, reasonSlowStart)
		})
	})
}

// Pick reads the router's clock: deadline shedding, the slow start and
// the breaker's open time follow it exactly, without a network or a
// sleep.
func TestPickFollowsTheRouterClock(t *testing.T) {
	// The router's loop goroutine reads the clock too (the route-change
	// log), so the fake clock is atomic.
	var nowNS atomic.Int64
	nowNS.Store(time.Unix(1000, 0).UnixNano())
	clock := func() time.Time { return time.Unix(0, nowNS.Load()) }
	advance := func(d time.Duration) { nowNS.Add(int64(d)) }
	pri, edge := namedUpstream("pri"), namedUpstream("edge")
	r, err := NewRouter(RouterOptions{
		Routes: []RouteConfig{{Model: "big", Upstream: pri, ShedOnDeadline: true,
			Fallback: &FallbackTarget{Upstream: edge, Model: "small"}}},
		Breakers: map[*Upstream]BreakerConfig{pri: {OpenFor: time.Second, SlowStart: 10 * time.Second, ConsecutiveFailures: 1}},
		Now:      clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mr := r.table.Load().models["big"]
	mr.live.p50.Store(int64(10 * time.Millisecond))
	pick := func(deadline time.Duration) Pick {
		pk := r.Pick(pri, pickInfo{model: "big", deadline: clock().Add(deadline)})
		pk.release()
		return pk
	}
	if pk := pick(9 * time.Millisecond); pk.route != "fallback" || pk.reason != reasonShedDeadline {
		t.Errorf("9ms left, p50 10ms: %s/%s, want fallback/%s", pk.route, pk.reason, reasonShedDeadline)
	}
	pk := pick(11 * time.Millisecond)
	if pk.route != "primary" || pk.err != nil {
		t.Fatalf("11ms left: %s/%s %v, want the primary", pk.route, pk.reason, pk.err)
	}
	pk.done(route.VerdictFailed) // one failure opens it (ConsecutiveFailures 1)
	if pk := pick(time.Second); pk.reason != reasonBreaker {
		t.Errorf("breaker open: %s/%s", pk.route, pk.reason)
	}
	advance(999 * time.Millisecond)
	if pk := pick(time.Second); pk.reason != reasonBreaker || pk.probe != nil {
		t.Errorf("open time not over: %s/%s probe %v", pk.route, pk.reason, pk.probe != nil)
	}
	// Past the open time gobreaker, which reads the time package, lets
	// the probes through (covered under real time by the route tests);
	// here the probes' success closes it.
	advance(time.Millisecond)
	mr.primary.Changed(BreakerHalfOpen, BreakerClosed)
	if d := mr.decide(mr.primary); d.reason != reasonSlowStart {
		t.Fatalf("closed again: %+v, want the slow start", d)
	}
	advance(10 * time.Second)
	if d := mr.decide(mr.primary); d.route != RoutePrimaryMode || d.reason != "" {
		t.Errorf("slow start over: %+v, want the primary", d)
	}
}
