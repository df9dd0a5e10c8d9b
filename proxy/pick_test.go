package proxy

import (
	"testing"
	"time"
)

// The precedence of decide, one row per state: forced > breaker > alert >
// slow start > cascade > primary.
func TestDecidePrecedence(t *testing.T) {
	open := &breaker{name: "pri"}
	open.state.Store(int32(BreakerOpen))
	closed := &breaker{name: "pri"}
	ramping := &breaker{name: "pri", cfg: BreakerConfig{SlowStart: time.Hour}, now: time.Now}
	ramping.rampUntil.Store(time.Now().Add(time.Hour).UnixNano())
	fb := &FallbackTarget{Model: "small"}
	cases := []struct {
		name          string
		forced, alert string
		fallback      bool
		cascade       bool
		pb            *breaker
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
		var got, status string
		eventually(t, "header and status to say "+want, func() bool {
			got = e.infer(t, time.Second).reason
			routes, _ := e.router.Status()
			status = routes[0].Reason
			return got == want && status == want
		})
	}
	t.Run("forced", func(t *testing.T) {
		e := newRouteEnv(t, nil)
		if err := e.router.SetForced("big", ForceFallback); err != nil {
			t.Fatal(err)
		}
		agree(t, e, reasonForced)
	})
	t.Run("breaker open", func(t *testing.T) {
		e := newRouteEnv(t, nil)
		e.pri.set(behaveError)
		agree(t, e, reasonBreaker)
	})
	t.Run("alert firing", func(t *testing.T) {
		e := newRouteEnv(t, func(_ *RouteConfig, ro *RouterOptions, _ *BreakerConfig) { ro.ProbeEvery = -1 })
		if _, err := e.router.Start("fallback", alert); err != nil {
			t.Fatal(err)
		}
		agree(t, e, reasonAlert)
	})
	t.Run("alert firing and breaker open", func(t *testing.T) {
		e := newRouteEnv(t, func(_ *RouteConfig, ro *RouterOptions, _ *BreakerConfig) { ro.ProbeEvery = -1 })
		e.pri.set(behaveError)
		agree(t, e, reasonBreaker)
		if _, err := e.router.Start("fallback", alert); err != nil {
			t.Fatal(err)
		}
		agree(t, e, reasonBreaker)
	})
	t.Run("slow start", func(t *testing.T) {
		e := newRouteEnv(t, func(_ *RouteConfig, _ *RouterOptions, bc *BreakerConfig) { bc.SlowStart = time.Minute })
		e.pri.set(behaveError)
		agree(t, e, reasonBreaker)
		e.pri.set(behaveOK)
		agree(t, e, reasonSlowStart)
	})
}
