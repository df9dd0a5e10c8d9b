package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proxy/route"
)

// The primary fails every call: the first failures are retried on the
// fallback, the breaker opens and sends the rest there; no call fails.
// Healed, the half-open probes close the breaker and calls return.
func TestRouteErrorsFallBackAndReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, nil)
		if r := e.infer(t, time.Second); r.code != codes.OK || r.server != "primary" || r.route != "" || r.model != "big" {
			t.Fatalf("healthy call: %+v, want the primary's answer without a route header", r)
		}
		e.pri.set(behaveError)
		var rs []result
		for range 30 {
			rs = append(rs, e.infer(t, time.Second))
		}
		got := tally(rs)
		if got["edge/retry"] == 0 || got["edge/breaker_open"] == 0 || got["edge/retry"]+got["edge/breaker_open"] != 30 {
			t.Fatalf("30 calls on a failing primary: %v; want all answered by the edge, first retried, then breaker_open", got)
		}
		for _, r := range rs {
			if r.model != "small" || r.route != monitor.RouteFallback {
				t.Fatalf("fallback answer %+v: want model_name small (the model that answered) and route fallback", r)
			}
		}
		e.edge.mu.Lock()
		asked, version := e.edge.asked[0], e.edge.versions[0]
		e.edge.mu.Unlock()
		if asked != "small" || version != "" {
			t.Errorf("edge was asked for %q version %q, want the fallback model small, no version (the primary's 3 dropped)", asked, version)
		}
		if st := e.modelBreaker(e.priUp, "big").State(); st == BreakerClosed {
			t.Errorf("breaker %s after 30 failures, want open or half-open", st)
		}

		e.pri.set(behaveOK)
		if r := e.call(t, time.Second); r.code != codes.OK || r.server != "edge" || r.reason != route.ReasonBreaker {
			t.Fatalf("call to the healed primary within the open time: %+v, want the edge's answer (breaker_open)", r)
		}
		e.outwaitOpenTime()
		for i := range 2 { // the half-open probes
			if r := e.call(t, time.Second); r.code != codes.OK || r.server != "primary" {
				t.Fatalf("probe %d to the healed primary: %+v, want its answer", i, r)
			}
		}
		if b := e.breakerStatus(t, "primary"); b.State != BreakerClosed.String() {
			t.Fatalf("primary breaker %+v after two good probes, want closed", b)
		}
		// Past the slow start (half the open time), and past a tick of the
		// router's loop, which notices that it ended.
		time.Sleep(time.Second)
		if r := e.call(t, time.Second); r.code != codes.OK || r.server != "primary" || r.route != "" {
			t.Fatalf("call after the slow start: %+v, want the primary's answer without a route header", r)
		}
		if routes, _ := e.router.Status(); routes[0].Changes != 2 || routes[0].Route != route.RoutePrimaryMode {
			t.Errorf("route status %+v, want back on primary after two changes", routes[0])
		}
	})
}

// A hung primary: calls are hedged to the fallback after the delay and
// answered there; the hedges count as slow calls, so the breaker opens
// and new calls go straight to the fallback. Nothing fails, nothing hangs.
func TestRouteHangHedgesThenTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
			rc.HedgeAfter = 20 * time.Millisecond
		})
		e.pri.set(behaveHang)
		got := tally(e.burst(t, 20, 5*time.Second))
		if got["edge/hedge"] == 0 || got["edge/hedge"]+got["edge/breaker_open"] != 20 {
			t.Fatalf("20 calls on a hung primary: %v; want all answered by the edge (hedge, then breaker_open)", got)
		}
		if b := e.breakerStatus(t, "primary"); b.Opened == 0 {
			t.Fatalf("primary breaker %+v after 20 hedged calls, want opened", b)
		}
		got = tally(e.burst(t, 10, 5*time.Second))
		if got["edge/hedge"]+got["edge/breaker_open"] != 10 {
			t.Fatalf("after the trip: %v; want all on the edge", got)
		}
		e.pri.set(behaveOK)
		e.outwaitOpenTime()
		if r := e.call(t, time.Second); r.code != codes.OK || r.server != "primary" {
			t.Errorf("probe to the healed primary: %+v, want its answer", r)
		}
	})
}

// A hedge leaves the fallback time to answer: with a hedge delay longer
// than the call's deadline, a call stuck on the primary is hedged at half
// of what its deadline leaves and answered, not failed at the deadline;
// sent before the model's delay, the hedge does not count the primary as
// slow (while the primary answers other calls: a hang is evidence at any
// delay, TestHangIsItsOwnEvidence).
func TestRouteHedgeWithinDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
			rc.HedgeAfter = time.Minute
		})
		b := e.modelBreaker(e.priUp, "big")
		for range 10 {
			e.pri.set(behaveHang)
			if r := e.call(t, 600*time.Millisecond); r.code != codes.OK || r.server != "edge" || r.reason != route.ReasonHedge {
				t.Fatalf("call stuck on the primary with a 600ms deadline and a 1m hedge delay: %+v, want the edge's answer by a hedge", r)
			}
			if n := b.Consecutive(); n != 0 {
				t.Fatalf("%d failures counted after an early hedge, want none", n)
			}
			e.pri.set(behaveOK)
			e.call(t, 600*time.Millisecond)
		}
		if b.State() != BreakerClosed {
			t.Errorf("breaker %s after early hedges, want closed", b.State())
		}
	})
}

// Automatic hedging never guesses: while the primary's tail is unknown
// no call is hedged (a guessed delay would answer every call of a model
// slower than the guess from the lighter model, and those won hedges
// would hide the primary's latency for good), and once it is known a
// hedge never goes before it, even when half the deadline comes sooner.
func TestRouteAutoHedgeWaitsForTheTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) { rc.HedgeAfter = 0 })
		e.pri.delay.Store(int64(1200 * time.Millisecond))
		e.pri.set(behaveSlow)
		if r := e.infer(t, 10*time.Second); r.code != codes.OK || r.server != "primary" {
			t.Errorf("a 1.2s call with the tail unknown: %+v, want the primary's answer, not a hedge", r)
		}
		// With the tail unknown only the deadline sets a hedge: a primary
		// hung from the start is hedged at half of it, but one call is not
		// counted slow: a delay from a guess is evidence of nothing, and
		// a hang is evidence only once it lasted a few delays.
		e.pri.set(behaveHang)
		if r := e.infer(t, 400*time.Millisecond); r.code != codes.OK || r.server != "edge" || r.reason != route.ReasonHedge {
			t.Errorf("a hung primary, tail unknown, 400ms deadline: %+v, want the edge's answer by a hedge", r)
		}
		if n := e.modelBreaker(e.priUp, "big").Consecutive(); n != 0 {
			t.Errorf("%d failures counted for the hung primary with its tail unknown, want none", n)
		}
		e.pri.set(behaveSlow)
		live := e.router.Route("big").Live()
		live.Learnt(0, 900*time.Millisecond, 0) // the model's own p99.9
		// Half the deadline (500ms) comes before the tail: the hedge waits
		// for the tail, and the primary, slow as it always is, answers.
		e.pri.delay.Store(int64(700 * time.Millisecond))
		if r := e.infer(t, time.Second); r.code != codes.OK || r.server != "primary" {
			t.Errorf("a 700ms call, 900ms tail, 1s deadline: %+v, want the primary's answer", r)
		}
		if h := live.Counters.Hedges.Load(); h != 1 {
			t.Errorf("%d hedges, want only the hung call's (none of a primary within its own tail)", h)
		}
		// Past the tail it is hedged.
		e.pri.set(behaveHang)
		if r := e.infer(t, 5*time.Second); r.code != codes.OK || r.server != "edge" || r.reason != route.ReasonHedge {
			t.Errorf("a hung primary with a 900ms tail: %+v, want the edge's answer by a hedge", r)
		}
	})
}

// A call still unanswered at the hedge delay is slow for the primary's
// breaker even when the budget affords no hedge: in a slowdown under load
// the hedges run out first, and the calls left waiting on the primary are
// the ones that must trip it.
func TestRouteSlowWithoutBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, ro *route.RouterOptions, bc *BreakerConfig) {
			rc.HedgeAfter = 20 * time.Millisecond
			ro.Budget = BudgetConfig{Ratio: -1} // no hedges, no retries
			bc.OpenFor = time.Hour
		})
		e.pri.delay.Store(int64(100 * time.Millisecond))
		e.pri.set(behaveSlow)
		for i := range 5 {
			if r := e.infer(t, 5*time.Second); r.code != codes.OK || r.server != "primary" {
				t.Fatalf("slow call %d without budget: %+v, want the primary's (late) answer", i, r)
			}
		}
		if st := e.modelBreaker(e.priUp, "big").State(); st != BreakerOpen {
			t.Fatalf("primary breaker %s after 5 calls slower than the hedge delay, want open", st)
		}
		if r := e.infer(t, 5*time.Second); r.server != "edge" || r.reason != route.ReasonBreaker {
			t.Errorf("call with the breaker open: %+v, want the edge's answer", r)
		}
	})
}

// The primary's process is gone (connection refused): calls are retried
// on the fallback at once, then the breaker sends them there; the
// restarted primary takes them back.
func TestRouteDeadPrimaryAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, nil)
		if r := e.infer(t, time.Second); r.server != "primary" {
			t.Fatalf("healthy call: %+v", r)
		}
		e.pri.kill()
		got := tally(e.burst(t, 20, 5*time.Second))
		if got["edge/retry"]+got["edge/breaker_open"] != 20 {
			t.Fatalf("20 calls to a dead primary: %v; want all answered by the edge", got)
		}
		e.pri.restart(t)
		waitReady(t, e.priUp.Conn()) // the proxy reconnects after its backoff
		e.outwaitOpenTime()
		if r := e.call(t, time.Second); r.code != codes.OK || r.server != "primary" {
			t.Errorf("probe to the restarted primary: %+v, want its answer", r)
		}
	})
}

// A non-idempotent model is never sent twice: a failed call is not
// retried and a hung one is not hedged; it reaches the fallback only when
// the breaker kept it from the primary.
func TestRouteNonIdempotentNeverSentTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
			rc.NonIdempotent, rc.HedgeAfter = true, 10*time.Millisecond
		})
		e.pri.set(behaveError)
		rs := make([]result, 0, 20)
		for range 20 {
			rs = append(rs, e.infer(t, time.Second))
		}
		got := tally(rs)
		if got["Unavailable"] != 5 || got["edge/breaker_open"] != 15 {
			t.Fatalf("non-idempotent calls on a failing primary: %v; want 5 failures (no retry), then 15 breaker_open", got)
		}
		if n := e.pri.calls.Load() + e.edge.calls.Load(); n != 20 {
			t.Errorf("%d upstream calls for 20 client calls: a non-idempotent call was sent twice", n)
		}

		e2 := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
			rc.NonIdempotent, rc.HedgeAfter = true, 10*time.Millisecond
		})
		e2.pri.set(behaveHang)
		if r := e2.infer(t, 200*time.Millisecond); r.code != codes.DeadlineExceeded {
			t.Errorf("non-idempotent call on a hung primary: %+v, want DEADLINE_EXCEEDED (not hedged)", r)
		}
		if n := e2.edge.calls.Load(); n != 0 {
			t.Errorf("the edge got %d calls: a non-idempotent call was hedged", n)
		}
	})
}

// Retries come from the budget: with a small one, a primary that fails
// every call (and a breaker that never trips) gets only a bounded number
// of retries; the rest fail with the primary's status.
func TestRouteRetryBudgetBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(_ *route.RouteConfig, ro *route.RouterOptions, bc *BreakerConfig) {
			ro.Budget = BudgetConfig{Ratio: 0.1, MinPerSecond: 1}
			bc.ConsecutiveFailures, bc.FailureRatio = -1, -1
		})
		e.pri.set(behaveError)
		start := time.Now()
		rs := make([]result, 0, 60)
		for range 60 {
			rs = append(rs, e.infer(t, time.Second))
		}
		got := tally(rs)
		retried := got["edge/retry"]
		if retried == 0 || retried+got["Unavailable"] != 60 {
			t.Fatalf("60 calls: %v", got)
		}
		// 10 tokens to start (ten seconds of the floor), 0.1 per call, and a
		// floor of 1 a second of the bubble's clock: far less than 60.
		if retried > 10+6+int(time.Since(start)/time.Second) {
			t.Errorf("%d retries of 60 calls with a 10%% budget", retried)
		}
	})
}

// An alert's fallback action holds the model on its fallback, sends one
// call in ProbeEvery to the primary so the alert sees it recover, and
// ends when the alert resolves.
func TestRouteAlertAction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(_ *route.RouteConfig, ro *route.RouterOptions, _ *BreakerConfig) { ro.ProbeEvery = 10 })
		labels := map[string]string{"alertname": "ModelLatencyAboveBaseline", "model": "big"}
		did, err := e.router.Start("fallback", labels)
		if err != nil || !strings.Contains(did, "small on edge") {
			t.Fatalf("Start: %q, %v", did, err)
		}
		var rs []result
		for range 30 {
			rs = append(rs, e.infer(t, time.Second))
		}
		if got := tally(rs); got["edge/alert"] != 27 || got["primary/"] != 3 {
			t.Fatalf("30 calls under the alert: %v; want 27 on the fallback, 3 probes on the primary", got)
		}
		if did, err := e.router.Stop("fallback", labels); err != nil || !strings.Contains(did, "back on its primary") {
			t.Fatalf("Stop: %q, %v", did, err)
		}
		if r := e.infer(t, time.Second); r.server != "primary" {
			t.Errorf("after the alert resolved: %+v", r)
		}
		if did, err := e.router.Start("fallback", map[string]string{"model": "nope"}); err != nil || !strings.Contains(did, "nothing to do") {
			t.Errorf("Start on a model without a fallback: %q, %v; want nothing done, no error", did, err)
		}
		if _, err := e.router.Start("reboot", labels); err == nil {
			t.Error("Start of an unknown action: no error")
		}
	})
}

// The operator forces either route; auto gives the model back.
func TestRouteForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, nil)
		if err := e.router.SetForced("big", route.ForceFallback); err != nil {
			t.Fatal(err)
		}
		if r := e.infer(t, time.Second); r.server != "edge" || r.reason != route.ReasonForced {
			t.Errorf("forced fallback: %+v", r)
		}
		// Forced primary ignores an open breaker.
		e.pri.set(behaveError)
		for range 10 {
			e.infer(t, time.Second)
		}
		if err := e.router.SetForced("big", route.ForcePrimary); err != nil {
			t.Fatal(err)
		}
		if r := e.infer(t, time.Second); r.code != codes.Unavailable {
			t.Errorf("forced primary on a failing primary: %+v, want its UNAVAILABLE", r)
		}
		if err := e.router.SetForced("big", "sometimes"); err == nil {
			t.Error("bad mode accepted")
		}
		if err := e.router.SetForced("other", route.ForceAuto); err == nil {
			t.Error("unrouted model accepted")
		}
	})
}

// Over its in-flight cap a model's call is rejected at once with
// RESOURCE_EXHAUSTED, or sent to its fallback when it has one.
func TestRouteShedInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, withFallback := range []bool{false, true} {
			e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
				rc.MaxInFlight = 1
				if !withFallback {
					rc.Fallback = nil
				}
			})
			e.pri.set(behaveHang)
			done := make(chan result, 1)
			go func() { done <- e.infer(t, 300*time.Millisecond) }()
			synctest.Wait()
			if n := e.pri.calls.Load(); n != 1 {
				t.Fatalf("%d calls on the primary, want the first in flight", n)
			}
			r := e.infer(t, 2*time.Second)
			switch {
			case !withFallback && r.code != codes.ResourceExhausted:
				t.Errorf("second call over max_in_flight: %+v, want RESOURCE_EXHAUSTED at once", r)
			case withFallback && (r.server != "edge" || r.reason != route.ReasonShedInFlight):
				t.Errorf("second call over max_in_flight with a fallback: %+v, want the edge (shed_in_flight)", r)
			}
			e.pri.set(behaveOK)
			if first := <-done; first.code != codes.DeadlineExceeded {
				t.Errorf("the hung call ended %+v, want DEADLINE_EXCEEDED at its deadline", first)
			}
			// The call is counted where it went: shed, or the fallback by
			// its reason.
			routes, _ := e.router.Status()
			calls := routes[0].Calls
			if withFallback && (calls.FallbackBy[route.ReasonShedInFlight] != 1 || calls.Shed[route.ReasonShedInFlight] != 0) ||
				!withFallback && calls.Shed[route.ReasonShedInFlight] != 1 {
				t.Errorf("with fallback %v: counted %+v", withFallback, calls)
			}
		}
	})
}

// A call whose deadline is shorter than the model's median latency is
// rejected at once instead of timing out on the GPU.
func TestRouteShedOnDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
			rc.ShedOnDeadline, rc.Fallback = true, nil
		})
		e.router.Route("big").Live().Learnt(time.Second, 0, 0)
		if r := e.infer(t, 100*time.Millisecond); r.code != codes.ResourceExhausted {
			t.Errorf("100ms deadline, 1s median: %+v, want RESOURCE_EXHAUSTED", r)
		}
		if n := e.pri.calls.Load(); n != 0 {
			t.Errorf("the primary got %d calls, want 0 (shed before sending)", n)
		}
		if r := e.infer(t, 5*time.Second); r.code != codes.OK {
			t.Errorf("5s deadline: %+v", r)
		}
	})
}

// A stream is routed on its first frame; on the fallback every frame is
// readdressed and the header says so.
func TestRouteStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, nil)
		run := func() (string, string, metadata.MD) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			s, err := e.client.ModelStreamInfer(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var servers, models []string
			for range 3 {
				if err := s.Send(&kservepb.ModelInferRequest{ModelName: "big"}); err != nil {
					t.Fatal(err)
				}
				resp, err := s.Recv()
				if err != nil {
					t.Fatal(err)
				}
				servers = append(servers, resp.InferResponse.Id)
				models = append(models, resp.InferResponse.ModelName)
			}
			s.CloseSend()
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("stream end: %v, want io.EOF", err)
			}
			hdr, _ := s.Header()
			return strings.Join(servers, ","), strings.Join(models, ","), hdr
		}
		if servers, models, hdr := run(); servers != "primary,primary,primary" || models != "big,big,big" || len(hdr.Get(grpcwire.HeaderRoute)) != 0 {
			t.Errorf("stream on the primary: %s %s %v", servers, models, hdr)
		}
		if err := e.router.SetForced("big", route.ForceFallback); err != nil {
			t.Fatal(err)
		}
		if servers, models, hdr := run(); servers != "edge,edge,edge" || models != "small,small,small" || hdr.Get(grpcwire.HeaderRoute)[0] != "fallback" {
			t.Errorf("stream on the fallback: %s %s %v", servers, models, hdr)
		}
		// The fallback's answer is degraded, a stream's as a unary call's.
		synctest.Wait()
		if routes, _ := e.router.Status(); routes[0].Calls.Degraded != 1 {
			t.Errorf("route counters %+v, want the fallback stream counted as degraded", routes[0].Calls)
		}
	})
}

// A panic in a hedge's goroutine (which no interceptor watches) fails
// that hedge only: counted, the call ends with the primary's status, the
// proxy keeps serving.
func TestRouteHedgePanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
			rc.HedgeAfter = 10 * time.Millisecond
		})
		testHookHedge = func() { panic("boom") }
		defer func() { testHookHedge = nil }()
		e.pri.set(behaveHang)
		if r := e.infer(t, 600*time.Millisecond); r.code != codes.DeadlineExceeded {
			t.Errorf("hung primary, panicking hedge: %+v, want the primary's DEADLINE_EXCEEDED", r)
		}
		if n := e.proxy.Stats().Panics; n != 1 {
			t.Errorf("panics = %d, want 1", n)
		}
		testHookHedge = nil
		e.pri.set(behaveOK)
		if r := e.infer(t, time.Second); r.code != codes.OK {
			t.Errorf("after the panic: %+v", r)
		}
	})
}

// Calls are recorded under the model the client asked for, with the route
// and the upstream that answered.
func TestRouteRecordsRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, nil)
		e.infer(t, time.Second)
		if err := e.router.SetForced("big", route.ForceFallback); err != nil {
			t.Fatal(err)
		}
		e.infer(t, time.Second)
		keys := map[[3]string]bool{}
		for range 2 {
			r := e.rec.next(t)
			keys[[3]string{r.key.Model, r.key.Upstream, r.key.Route}] = true
		}
		for _, want := range [][3]string{{"big", "primary", "primary"}, {"big", "edge", "fallback"}} {
			if !keys[want] {
				t.Errorf("no record %v in %v", want, keys)
			}
		}
	})
}

// A model without a route on an upstream with a breaker: the open breaker
// fails calls at once with UNAVAILABLE.
func TestRouteBreakerWithoutFallbackFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, nil)
		e.pri.set(behaveError)
		ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
		defer cancel()
		call := func() error {
			_, err := e.client.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "unrouted"}, grpc.WaitForReady(false))
			return err
		}
		for range 5 {
			call()
		}
		before := e.pri.calls.Load()
		err := call()
		if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "circuit breaker open") {
			t.Errorf("call with the breaker open: %v", err)
		}
		if e.pri.calls.Load() != before {
			t.Error("the call reached the primary through an open breaker")
		}
	})
}

// The fallback upstream's own breaker: with the primary and the edge both
// failing, the edge's breaker opens too and calls end at once with
// UNAVAILABLE naming it, reaching neither server; healed, the edge answers
// again once its breaker closes.
func TestRouteFallbackBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var edgeUp *Upstream
		e := newRouteEnv(t, func(rc *route.RouteConfig, ro *route.RouterOptions, _ *BreakerConfig) {
			edgeUp = rc.Fallback.Upstream.(*Upstream)
			ro.Breakers[edgeUp] = BreakerConfig{ConsecutiveFailures: 3, OpenFor: 100 * time.Millisecond, Probes: 1}
		})
		e.pri.set(behaveError)
		e.edge.set(behaveError)
		for range 20 {
			e.infer(t, time.Second)
		}
		synctest.Wait()
		if b := e.breakerStatus(t, "edge"); b.State != BreakerOpen.String() {
			t.Fatalf("edge breaker %+v after 20 failed fallback calls, want open", b)
		}
		pri, edge := e.pri.calls.Load(), e.edge.calls.Load()
		if r := e.call(t, time.Second); r.code != codes.Unavailable {
			t.Fatalf("call with primary and edge failing: %+v, want UNAVAILABLE", r)
		}
		if e.pri.calls.Load() != pri || e.edge.calls.Load() != edge {
			t.Fatalf("a call with both breakers open reached a server (primary %d→%d, edge %d→%d calls)",
				pri, e.pri.calls.Load(), edge, e.edge.calls.Load())
		}
		e.edge.set(behaveOK)
		e.outwaitOpenTime() // the edge's open time is the primary's
		if r := e.call(t, time.Second); r.code != codes.OK || r.server != "edge" {
			t.Errorf("first call past the open times, edge healed: %+v, want the edge's answer", r)
		}
		if b := e.breakerStatus(t, "edge"); b.State != BreakerClosed.String() {
			t.Errorf("edge breaker %+v after its probe answered, want closed", b)
		}
	})
}

// The fallback's upstream gets a breaker with the defaults when none is
// configured, so two sick servers answer at once.
func TestRouteFallbackDefaultBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var edgeUp *Upstream
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
			edgeUp = rc.Fallback.Upstream.(*Upstream)
		})
		b := e.modelBreaker(edgeUp, "small")
		if b == nil {
			t.Fatal("the fallback upstream has no breaker")
		}
		if got, want := b.Config(), (BreakerConfig{}).WithDefaults(); got.OpenFor != want.OpenFor || got.ConsecutiveFailures != want.ConsecutiveFailures {
			t.Errorf("fallback breaker %+v, want the defaults %+v", got, want)
		}
	})
}

// A fallback on the primary's own server (another model name) still
// answers while that server's breaker is open: the breaker opened on the
// primary model's failures, not the lighter model's.
func TestRouteFallbackOnSameUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, bc *BreakerConfig) {
			rc.Fallback = &route.FallbackTarget{Upstream: rc.Upstream, Model: "small"}
			bc.OpenFor = time.Hour
		})
		e.pri.only.Store("big")
		e.pri.set(behaveError)
		for range 20 {
			e.infer(t, time.Second)
		}
		if st := e.modelBreaker(e.priUp, "big").State(); st != BreakerOpen {
			t.Fatalf("primary breaker %s after 20 failed calls, want open", st)
		}
		for range 5 {
			r := e.infer(t, time.Second)
			if r.code != codes.OK || r.server != "primary" || r.model != "small" || r.route != monitor.RouteFallback {
				t.Fatalf("call with the primary's breaker open: %+v, want small's answer from the same server", r)
			}
		}
	})
}

// The slow start keeps calls off a fallback whose breaker is open: the
// primary that just answered its probes beats a refusal.
func TestRouteSlowStartSkipsAnOpenFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var edgeUp *Upstream
		e := newRouteEnv(t, func(rc *route.RouteConfig, ro *route.RouterOptions, bc *BreakerConfig) {
			edgeUp = rc.Fallback.Upstream.(*Upstream)
			ro.Breakers[edgeUp] = BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Hour}
			bc.SlowStart = time.Hour // the ramp lasts the whole test
		})
		e.pri.set(behaveError)
		e.edge.set(behaveError)
		for range 20 {
			e.infer(t, time.Second)
		}
		if pri, edge := e.modelBreaker(e.priUp, "big").State(), e.modelBreaker(edgeUp, "small").State(); pri == BreakerClosed || edge != BreakerOpen {
			t.Fatalf("breakers primary %s, edge %s after both failed, want both open", pri, edge)
		}
		e.pri.set(behaveOK)
		e.outwaitOpenTime()
		e.callUntil(t, "the healed primary's probes to close its breaker", 5, func(result) bool {
			return e.breakerStatus(t, "primary").State == BreakerClosed.String()
		})
		for i := range 20 {
			if r := e.infer(t, time.Second); r.code != codes.OK || r.server != "primary" {
				t.Fatalf("call %d in the slow start with the fallback's breaker open: %+v, want the primary's answer", i, r)
			}
		}
	})
}

// Cascade: the edge answers; a confident answer is returned, an unsure one
// goes to the primary, and when the primary fails the edge's answer beats
// an error.
func TestRouteCascade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
			rc.Cascade = &route.CascadeConfig{Output: "probs", Threshold: 0.6}
		})
		e.edge.conf.Store(float32(0.9))
		if r := e.infer(t, time.Second); r.server != "edge" || r.route != monitor.RouteCascadeEdge || r.reason != route.ReasonConfident || r.model != "small" {
			t.Errorf("confident edge: %+v", r)
		}
		e.edge.conf.Store(float32(0.4))
		if r := e.infer(t, time.Second); r.server != "primary" || r.route != monitor.RouteCascadeEscalated || r.reason != route.ReasonLowConfidence || r.model != "big" {
			t.Errorf("unsure edge: %+v, want escalated to the primary", r)
		}
		e.pri.set(behaveError)
		if r := e.infer(t, time.Second); r.server != "edge" || r.reason != route.ReasonPrimaryFailed {
			t.Errorf("unsure edge, failing primary: %+v, want the edge's answer", r)
		}
		e.pri.set(behaveOK)
		e.edge.set(behaveError)
		if r := e.infer(t, time.Second); r.server != "primary" || r.reason != route.ReasonEdgeFailed {
			t.Errorf("failing edge: %+v, want the primary's answer", r)
		}
		routes, _ := e.router.Status()
		if c := routes[0].Calls; c.CascadeEdge != 2 || c.CascadeEscalated != 2 {
			t.Errorf("cascade counters %+v, want 2 edge answers and 2 escalations", c)
		}
	})
}

// sharedHeaderBatcher batches every call alone but answers each with the
// same header and trailer maps, as a batch's callers get them
// (batcher.Result: shared, not to be modified).
type sharedHeaderBatcher struct{ header, trailer metadata.MD }

func (sharedHeaderBatcher) Handles(string, string) bool { return true }

func (s sharedHeaderBatcher) Do(ctx context.Context, r batcher.Request) (batcher.Result, error) {
	resp, _, _, err := r.Invoke(ctx, r.Method, r.Payload, r.MD)
	return batcher.Result{Payload: resp, Header: s.header, Trailer: s.trailer, BatchSize: 1}, err
}

// TestRouteFallbackLeavesBatchHeaderAlone: a batched answer of the
// fallback is marked in the caller's own header, not in the batch's
// header that every caller of the batch reads: writing that crashed the
// proxy with "concurrent map iteration and map write" under batching and
// a fallback.
func TestRouteFallbackLeavesBatchHeaderAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := sharedHeaderBatcher{header: metadata.Pairs("x-upstream", "yes"), trailer: metadata.Pairs("x-t", "t")}
		e := newRouteEnvWith(t, nil, WithBatcher(b))
		if err := e.router.SetForced("big", route.ForceFallback); err != nil {
			t.Fatal(err)
		}
		for _, r := range e.burst(t, 8, 5*time.Second) {
			if r.code != codes.OK || r.server != "edge" || r.route != monitor.RouteFallback {
				t.Fatalf("forced fallback through the batcher: %+v", r)
			}
		}
		if want := metadata.Pairs("x-upstream", "yes"); !reflect.DeepEqual(b.header, want) {
			t.Errorf("the batch's shared header became %v, want %v unchanged", b.header, want)
		}
	})
}

// TestRouteCascadeHungPrimary: an unsure edge answer escalated to a hung
// primary comes back after the model's patience (the hedge delay, or
// half the deadline while the primary's tail is unknown), marked
// primary_slow, instead of the caller's DEADLINE_EXCEEDED with the answer
// in the proxy's hands; the cut escalations count as slow and trip the
// model's breaker on the primary when the delay is evidence (configured),
// not while it is a guess (automatic, the tail unknown). The primary's
// transport breaker stays closed: the server answers other models.
func TestRouteCascadeHungPrimary(t *testing.T) {
	for _, tc := range []struct {
		hedge, deadline time.Duration
		trips           bool
	}{
		{50 * time.Millisecond, 5 * time.Second, true},
		{0, time.Second, false}, // automatic: half the deadline, once the edge answered
	} {
		t.Run(fmt.Sprint("hedge_after=", tc.hedge), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
					rc.Cascade = &route.CascadeConfig{Output: "probs", Threshold: 0.6}
					rc.HedgeAfter = tc.hedge
				})
				e.edge.conf.Store(float32(0.4))
				e.pri.set(behaveHang)
				for i := range 5 {
					if r := e.infer(t, tc.deadline); r.code != codes.OK || r.server != "edge" || r.route != monitor.RouteCascadeEdge || r.reason != route.ReasonPrimarySlow {
						t.Fatalf("call %d: unsure edge, hung primary: %+v, want the edge's answer marked primary_slow", i, r)
					}
				}
				want := BreakerClosed
				if tc.trips {
					want = BreakerOpen
				}
				if b := e.breakerStatus(t, "primary"); b.Model != "big" || b.State != want.String() {
					t.Errorf("big's breaker on the primary %+v after 5 cut escalations, want %s", b, want)
				}
				if b := e.transportStatus(t, "primary"); b.State != BreakerClosed.String() {
					t.Errorf("the primary's own breaker %+v, want closed", b)
				}
			})
		})
	}
}

// TestRouteStreamRetriedWhenPrimaryRefuses: a stream whose primary cannot
// be opened (the server is gone: nothing reached it) goes to the fallback
// at once, marked retry, and the refusal counts for the primary's breaker;
// a non-idempotent model's stream gets the UNAVAILABLE instead.
func TestRouteStreamRetriedWhenPrimaryRefuses(t *testing.T) {
	for _, nonIdem := range []bool{false, true} {
		t.Run(fmt.Sprint("non_idempotent=", nonIdem), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) { rc.NonIdempotent = nonIdem })
				e.pri.kill()
				// Until the proxy's connection notices, a stream may still open
				// on it and break mid-way (EOF): not the case under test.
				synctest.Wait()
				if s := e.priUp.Conn().GetState(); s == connectivity.Ready {
					t.Fatalf("the proxy's connection to the killed primary is %s", s)
				}
				ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
				defer cancel()
				s, err := e.client.ModelStreamInfer(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Send(&kservepb.ModelInferRequest{ModelName: "big"}); err != nil {
					t.Fatal(err)
				}
				resp, err := s.Recv()
				if nonIdem {
					if status.Code(err) != codes.Unavailable {
						t.Fatalf("non-idempotent stream to a dead primary: %v, want UNAVAILABLE", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("stream to a dead primary with a fallback: %v", err)
				}
				hdr, _ := s.Header()
				if resp.InferResponse.Id != "edge" || resp.InferResponse.ModelName != "small" ||
					hdr.Get(grpcwire.HeaderRoute)[0] != monitor.RouteFallback || hdr.Get(grpcwire.HeaderRouteReason)[0] != route.ReasonRetry {
					t.Errorf("answer %v with header %v, want the edge's small, marked fallback/retry", resp.InferResponse, hdr)
				}
				s.CloseSend()
				routes, breakers := e.router.Status()
				if c := routes[0].Calls; c.Retries != 1 || c.RetriesWon != 1 || c.Primary != 0 {
					t.Errorf("route counters %+v, want one retry won and no primary call", c)
				}
				// A refused connection is the transport's failure: the
				// primary's own breaker counts it, big's says nothing.
				for _, b := range breakers {
					if want := map[string]int64{"": 1, "big": 0}[b.Model]; b.Upstream == "primary" && b.Failures != want {
						t.Errorf("primary breaker %+v, want %d failures (the refused open counted by the transport's)", b, want)
					}
				}
			})
		})
	}
}

// panickyBatcher panics in Do while panics is set, else sends alone.
type panickyBatcher struct{ panics *atomic.Bool }

func (panickyBatcher) Handles(string, string) bool { return true }

func (b panickyBatcher) Do(ctx context.Context, r batcher.Request) (batcher.Result, error) {
	if b.panics.Load() {
		panic("batcher bug")
	}
	return batcher.Result{}, batcher.ErrNotBatched
}

// TestRouteProbePanicFreesItsSlot: a half-open probe whose call panics
// (recovered at the server) gives its place back: once the bug is gone
// the next probes close the breaker. gobreaker frees a probe's slot only
// on a report, so without one the breaker stayed half-open for good and
// the model on its fallback until a restart.
func TestRouteProbePanicFreesItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var panics atomic.Bool
		e := newRouteEnvWith(t, func(_ *route.RouteConfig, _ *route.RouterOptions, bc *BreakerConfig) { bc.SlowStart = time.Nanosecond },
			WithBatcher(panickyBatcher{&panics}))
		e.pri.set(behaveError)
		e.tripPrimary(t)
		e.pri.set(behaveOK)
		panics.Store(true)
		e.outwaitOpenTime() // the next calls are probes
		for range 4 {
			e.call(t, time.Second) // probes that panic
		}
		panics.Store(false)
		for i := range 2 { // Probes
			if r := e.call(t, time.Second); r.code != codes.OK || r.server != "primary" {
				t.Fatalf("probe %d once nothing panics: %+v, want the primary's answer", i, r)
			}
		}
		if b := e.breakerStatus(t, "primary"); b.State != BreakerClosed.String() {
			t.Errorf("primary breaker %+v after two good probes, want closed", b)
		}
	})
}

// blockingHandler is a slog.Handler whose writes wait for release, like a
// full stderr pipe; it records the messages it was given.
type blockingHandler struct {
	release chan struct{}
	mu      *sync.Mutex
	msgs    *[]string
}

func (h blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h blockingHandler) Handle(_ context.Context, r slog.Record) error {
	<-h.release
	h.mu.Lock()
	*h.msgs = append(*h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h blockingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h blockingHandler) WithGroup(string) slog.Handler      { return h }

// TestBreakerChangeNeverWaitsOnTheLog: gobreaker's state-change callback
// runs under its mutex, which every call to that upstream needs; a log
// that blocks must not stall them. The change is logged all the same, by
// the router's loop, once the log moves again.
func TestBreakerChangeNeverWaitsOnTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := blockingHandler{release: make(chan struct{}), mu: &sync.Mutex{}, msgs: &[]string{}}
		e := newRouteEnv(t, func(_ *route.RouteConfig, ro *route.RouterOptions, _ *BreakerConfig) { ro.Logger = slog.New(h) })
		var releaseOnce sync.Once
		release := func() { releaseOnce.Do(func() { close(h.release) }) }
		t.Cleanup(release) // before the env's: a failed run must not hang its cleanup
		e.pri.set(behaveError)
		// Each call reaches the breaker; with the log blocked, none may wait.
		for range 20 {
			if r := e.infer(t, 5*time.Second); r.code != codes.OK {
				t.Fatalf("call while the log is blocked: %+v", r)
			}
		}
		if _, bs := e.router.Status(); bs[len(bs)-1].Opened == 0 && bs[0].Opened == 0 {
			t.Fatalf("breakers %+v: want the primary's opened", bs)
		}
		release()
		synctest.Wait()
		h.mu.Lock()
		defer h.mu.Unlock()
		if !slices.Contains(*h.msgs, "circuit breaker") {
			t.Errorf("logged %q once the log moved, want the breaker change", *h.msgs)
		}
	})
}
