package proxy

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/proxy/route"
)

// steadyLoad sends calls of "big" every period from now (the bubble's
// clock) while phase(i) for the call's index i says how the primary
// behaves before the call is sent (nil: no change), each with a deadline
// of timeout, and returns every call's result once all have ended.
func (e *routeEnv) steadyLoad(t *testing.T, n int, period, timeout time.Duration, phase func(i int)) []result {
	t.Helper()
	out := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		if phase != nil {
			phase(i)
		}
		wg.Go(func() { out[i] = e.infer(t, timeout) })
		time.Sleep(period)
	}
	wg.Wait()
	synctest.Wait()
	return out
}

// youngTail gives big an automatic hedge delay learnt from a tenth of
// the calls a p99.9 needs: 3 x 5ms, a delay that is no evidence alone.
func (e *routeEnv) youngTail() *route.Live {
	live := e.router.Route("big").Live()
	live.Learnt(0, 5*time.Millisecond, route.MinTailCalls/10)
	return live
}

// TestHangIsItsOwnEvidence is issue 45's regression: the primary hangs
// soon after start, its tail learnt from too few calls for its automatic
// hedge delay to be evidence, under a steady 100 calls/s with 2s
// deadlines and the default retry budget (hedges for a fraction of the
// calls). The primary answering nothing while calls wait past a few hedge
// delays opens its breaker on that evidence alone, and the model's calls
// move to the fallback; no call fails. Without it the breaker waits for
// evidence that never comes, and the calls the budget cannot hedge run
// into their deadlines.
func TestHangIsItsOwnEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, ro *route.RouterOptions, bc *BreakerConfig) {
			rc.HedgeAfter = 0          // automatic
			ro.Budget = BudgetConfig{} // the default: 20% of the calls + 10/s
			bc.OpenFor = time.Hour
		})
		e.youngTail()
		for i := range 20 {
			if r := e.call(t, 2*time.Second); r.code != codes.OK || r.server != "primary" {
				t.Fatalf("healthy call %d: %+v, want the primary's answer", i, r)
			}
		}
		e.pri.set(behaveHang)
		rs := e.steadyLoad(t, 300, 10*time.Millisecond, 2*time.Second, nil)
		got := tally(rs)
		if got["edge/hedge"]+got["edge/breaker_open"] != len(rs) {
			t.Errorf("%d calls on a primary hung soon after start: %v; want every one answered by the fallback (hedged, then breaker_open)", len(rs), got)
		}
		b := e.modelBreaker(e.priUp, "big")
		if b.State() != BreakerOpen {
			t.Fatalf("big's breaker %s after the primary answered nothing to %d calls, want open", b.State(), len(rs))
		}
		// Moved on the hang's evidence, long before the last calls: these
		// went straight to the fallback.
		for i, r := range rs[len(rs)-100:] {
			if r.reason != route.ReasonBreaker {
				t.Fatalf("call %d of the last 100: %+v, want the fallback's answer by breaker_open", i, r)
			}
		}
		if routes, _ := e.router.Status(); routes[0].Route != route.RouteFallbackMode {
			t.Errorf("big's route %+v, want fallback", routes[0])
		}
	})
}

// TestColdStartSlowCallsTripNothing: a cold start whose first calls are
// slow (the model warming up: every call of the first half second takes
// 1.5s, past its hedge at half the deadline while the tail is unknown),
// then, the tail learnt from a few calls, a brief stall past the young
// hedge delay: the primary answers within a few hedge delays each time,
// so no hedge counts against it. Nothing trips, no failure is counted,
// the route never changes, and every call is answered.
func TestColdStartSlowCallsTripNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, ro *route.RouterOptions, _ *BreakerConfig) {
			rc.HedgeAfter = 0 // automatic
			ro.Budget = BudgetConfig{}
		})
		b := e.modelBreaker(e.priUp, "big")
		e.pri.delay.Store(int64(1500 * time.Millisecond))
		e.pri.set(behaveSlow)
		warm := e.steadyLoad(t, 150, 10*time.Millisecond, 2*time.Second, func(i int) {
			if i == 50 {
				e.pri.set(behaveOK)
			}
		})
		e.youngTail()
		stall := e.steadyLoad(t, 100, 10*time.Millisecond, 2*time.Second, func(i int) {
			switch i {
			case 50: // slower than the 15ms delay for 3 calls
				e.pri.delay.Store(int64(25 * time.Millisecond))
				e.pri.set(behaveSlow)
			case 53:
				e.pri.set(behaveOK)
			}
		})
		for phase, rs := range map[string][]result{"warm-up": warm, "stall": stall} {
			got := tally(rs)
			if got["edge/hedge"] == 0 || got["primary/"]+got["edge/hedge"] != len(rs) {
				t.Errorf("%s: %v; want every call answered, the slowest by hedges", phase, got)
			}
		}
		calls, failures := b.Counts()
		if b.State() != BreakerClosed || b.Consecutive() != 0 || failures != 0 || calls == 0 {
			t.Errorf("big's breaker %s, %d failures in a row, %d of %d calls failed after a slow cold start; want closed, none",
				b.State(), b.Consecutive(), failures, calls)
		}
		if routes, _ := e.router.Status(); routes[0].Changes != 0 || routes[0].Route != route.RoutePrimaryMode {
			t.Errorf("big's route %+v, want primary, never changed", routes[0])
		}
	})
}
