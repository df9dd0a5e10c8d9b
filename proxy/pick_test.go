package proxy

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/infergate/infergate/proxy/route"
)

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
			if err := e.router.SetForced("big", route.ForceFallback); err != nil {
				t.Fatal(err)
			}
			agree(t, e, route.ReasonForced)
		})
	})
	t.Run("breaker open", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRouteEnv(t, nil)
			e.pri.set(behaveError)
			e.tripPrimary(t)
			agree(t, e, route.ReasonBreaker)
		})
	})
	t.Run("alert firing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRouteEnv(t, func(_ *route.RouteConfig, ro *route.RouterOptions, _ *BreakerConfig) { ro.ProbeEvery = -1 })
			if _, err := e.router.Start("fallback", alert); err != nil {
				t.Fatal(err)
			}
			agree(t, e, route.ReasonAlert)
		})
	})
	t.Run("alert firing and breaker open", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRouteEnv(t, func(_ *route.RouteConfig, ro *route.RouterOptions, _ *BreakerConfig) { ro.ProbeEvery = -1 })
			e.pri.set(behaveError)
			e.tripPrimary(t)
			agree(t, e, route.ReasonBreaker)
			if _, err := e.router.Start("fallback", alert); err != nil {
				t.Fatal(err)
			}
			agree(t, e, route.ReasonBreaker)
		})
	})
	t.Run("slow start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRouteEnv(t, func(_ *route.RouteConfig, _ *route.RouterOptions, bc *BreakerConfig) { bc.SlowStart = time.Minute })
			e.pri.set(behaveError)
			e.tripPrimary(t)
			agree(t, e, route.ReasonBreaker)
			e.pri.set(behaveOK)
			e.outwaitOpenTime()
			e.callUntil(t, "the healed primary's probes to close its breaker", 5, func(result) bool {
				return e.breakerStatus(t, "primary").State == BreakerClosed.String()
			})
			agree(t, e, route.ReasonSlowStart)
		})
	})
}
