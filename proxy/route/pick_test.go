package route

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/infergate/infergate/proxy/pool"
)

// The precedence of decide, one row per state: forced > breaker > alert >
// slow start > cascade > primary.
func TestDecidePrecedence(t *testing.T) {
	open := NewBreaker("pri", "", BreakerConfig{}, time.Now, nil)
	open.Changed(BreakerClosed, BreakerOpen)
	closed := NewBreaker("pri", "", BreakerConfig{}, time.Now, nil)
	ramping := NewBreaker("pri", "", BreakerConfig{SlowStart: time.Hour}, time.Now, nil)
	ramping.Changed(BreakerHalfOpen, BreakerClosed)
	fb := &FallbackTarget{Model: "small"}
	cases := []struct {
		name          string
		forced, alert string
		fallback      bool
		cascade       bool
		pb            *Breaker
		route, reason string
	}{
		{"healthy", ForceAuto, "", true, false, closed, RoutePrimaryMode, ""},
		{"no breaker", ForceAuto, "", true, false, nil, RoutePrimaryMode, ""},
		{"forced primary beats an open breaker", ForcePrimary, "A", true, false, open, RoutePrimaryMode, ""},
		{"forced fallback beats an open breaker", ForceFallback, "A", true, false, open, RouteFallbackMode, ReasonForced},
		{"breaker open", ForceAuto, "", true, false, open, RouteFallbackMode, ReasonBreaker},
		{"breaker open and alert firing", ForceAuto, "A", true, false, open, RouteFallbackMode, ReasonBreaker},
		{"breaker open, no fallback", ForceAuto, "", false, false, open, RoutePrimaryMode, ReasonBreaker},
		{"alert firing", ForceAuto, "A", true, false, closed, RouteFallbackMode, ReasonAlert},
		{"alert firing, no fallback", ForceAuto, "A", false, false, closed, RoutePrimaryMode, ""},
		{"alert beats slow start", ForceAuto, "A", true, false, ramping, RouteFallbackMode, ReasonAlert},
		{"slow start", ForceAuto, "", true, false, ramping, RouteFallbackMode, ReasonSlowStart},
		{"cascade ignores slow start", ForceAuto, "", true, true, ramping, RouteCascadeMode, ""},
		{"cascade", ForceAuto, "", true, true, closed, RouteCascadeMode, ""},
		{"cascade, breaker open", ForceAuto, "", true, true, open, RouteFallbackMode, ReasonBreaker},
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
			mr := &ModelRoute{cfg: rc, forced: tc.forced, alert: tc.alert, live: &Live{}}
			d := mr.decide(tc.pb)
			if d.route != tc.route || d.reason != tc.reason {
				t.Errorf("decide = %s/%q, want %s/%q (why %q)", d.route, d.reason, tc.route, tc.reason, d.why)
			}
		})
	}
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
	pri, edge := &fakeUpstream{name: "pri"}, &fakeUpstream{name: "edge"}
	r, err := NewRouter(RouterOptions{
		Routes: []RouteConfig{{Model: "big", Upstream: pri, ShedOnDeadline: true,
			Fallback: &FallbackTarget{Upstream: edge, Model: "small"}}},
		Breakers: map[Upstream]BreakerConfig{pri: {OpenFor: time.Second, SlowStart: 10 * time.Second, ConsecutiveFailures: 1}},
		Now:      clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mr := r.table.Load().models["big"]
	mr.live.p50.Store(int64(10 * time.Millisecond))
	pick := func(deadline time.Duration) Pick {
		pk := r.Pick(pri, PickInfo{Model: "big", Deadline: clock().Add(deadline)})
		pk.Release()
		return pk
	}
	if pk := pick(9 * time.Millisecond); pk.Route != "fallback" || pk.Reason != ReasonShedDeadline {
		t.Errorf("9ms left, p50 10ms: %s/%s, want fallback/%s", pk.Route, pk.Reason, ReasonShedDeadline)
	}
	pk := pick(11 * time.Millisecond)
	if pk.Route != "primary" || pk.Err != nil {
		t.Fatalf("11ms left: %s/%s %v, want the primary", pk.Route, pk.Reason, pk.Err)
	}
	pk.Done(VerdictFailed) // one failure opens it (ConsecutiveFailures 1)
	if pk := pick(time.Second); pk.Reason != ReasonBreaker {
		t.Errorf("breaker open: %s/%s", pk.Route, pk.Reason)
	}
	advance(999 * time.Millisecond)
	if pk := pick(time.Second); pk.Reason != ReasonBreaker || pk.Probe != nil {
		t.Errorf("open time not over: %s/%s probe %v", pk.Route, pk.Reason, pk.Probe != nil)
	}
	// Past the open time gobreaker, which reads the time package, lets
	// the probes through (covered under real time by the route tests);
	// here the probes' success closes it.
	advance(time.Millisecond)
	mr.primary.Changed(BreakerHalfOpen, BreakerClosed)
	if d := mr.decide(mr.primary); d.reason != ReasonSlowStart {
		t.Fatalf("closed again: %+v, want the slow start", d)
	}
	advance(10 * time.Second)
	if d := mr.decide(mr.primary); d.route != RoutePrimaryMode || d.reason != "" {
		t.Errorf("slow start over: %+v, want the primary", d)
	}
}

// fakeUpstream is an upstream of name with no endpoints, for the router
// alone.
type fakeUpstream struct{ name string }

func (u *fakeUpstream) Name() string                { return u.name }
func (u *fakeUpstream) Server() (any, string)       { return u, u.name }
func (u *fakeUpstream) Endpoints() []*pool.Endpoint { return nil }
func (u *fakeUpstream) Balance() pool.Balance       { return pool.BalanceLatency }
func (u *fakeUpstream) SlowEndpoint(string, int64) (pool.SlowEndpoint, bool) {
	return pool.SlowEndpoint{}, false
}
func (u *fakeUpstream) Replicas(string, int64) int { return 1 }
