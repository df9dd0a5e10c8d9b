package proxy

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proxy/route"
)

// inferModel makes one ModelInfer call of model and returns its status
// and the server that answered ("" on an error).
func (e *routeEnv) inferModel(t *testing.T, model string) (codes.Code, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	resp, err := e.client.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: model}, grpc.WaitForReady(false))
	if err != nil {
		return status.Code(err), "", err
	}
	return codes.OK, resp.Id, nil
}

// TestBreakerScopeIsItsEvidence: a model whose calls all fail on a server
// (the server's own UNAVAILABLE) opens that model's breaker there and
// goes to its fallback, which lives on the same server, while another
// model there is never refused; a dead server (connections refused) then
// opens the server's own breaker, which refuses every model there at once.
func TestBreakerScopeIsItsEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, _ *BreakerConfig) {
			rc.Fallback = &route.FallbackTarget{Upstream: rc.Upstream, Model: "small"} // beside it
		})
		e.pri.only.Store("big")
		e.pri.set(behaveError)
		for i := range 30 {
			if r := e.call(t, time.Second); r.code != codes.OK || r.model != "small" || r.route != "fallback" {
				t.Fatalf("big's call %d with big failing: %+v, want its fallback small's answer", i, r)
			}
			if code, server, err := e.inferModel(t, "other"); code != codes.OK || server != "primary" {
				t.Fatalf("other's call %d beside big's failures: %v, want the primary's answer", i, err)
			}
		}
		if b := e.modelBreaker(e.priUp, "big"); b.State() == BreakerClosed {
			t.Errorf("big's breaker on the primary %s after 30 failures, want open", b.State())
		}
		if b := e.transportStatus(t, "primary"); b.State != BreakerClosed.String() || b.Failures != 0 {
			t.Errorf("the primary's own breaker %+v after one model's failures, want closed and no failure", b)
		}
		if b := e.modelBreaker(e.priUp, "other"); b != nil {
			t.Errorf("other's breaker on the primary %v, want none: it never failed", b)
		}

		// A dead server: the way to it fails for every model.
		e.pri.kill()
		for range 10 {
			e.inferModel(t, "other")
			synctest.Wait()
		}
		if b := e.transportStatus(t, "primary"); b.State == BreakerClosed.String() {
			t.Errorf("the primary's own breaker %+v after refused connections, want open", b)
		}
		if b := e.modelBreaker(e.priUp, "other"); b != nil {
			t.Errorf("other's own breaker %s: a dead server says nothing of the model, want none made", b.State())
		}
		before := e.pri.calls.Load()
		code, _, err := e.inferModel(t, "other")
		if code != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "circuit breaker open") {
			t.Errorf("other's call with the server's breaker open: %v, want UNAVAILABLE naming the breaker", err)
		}
		if e.pri.calls.Load() != before {
			t.Error("a call reached the dead server through its open breaker")
		}
	})
}

// TestHedgeIsEvidenceOnceItsDelayIs: an automatic hedge delay learnt from
// too few calls sends hedges but counts nothing against a primary that
// still answers (a hang is its own evidence: TestHangIsItsOwnEvidence);
// once the primary's tail has as many calls behind it as the alerts need
// to bound a p99.9, a primary still unanswered at the delay is a slow
// call.
func TestHedgeIsEvidenceOnceItsDelayIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, func(rc *route.RouteConfig, _ *route.RouterOptions, bc *BreakerConfig) {
			rc.HedgeAfter = 0 // automatic
			bc.ConsecutiveFailures = 3
		})
		live := e.router.Route("big").Live()
		live.Learnt(0, 10*time.Millisecond, route.MinTailCalls-1) // a delay of 30ms, learnt from a few calls
		b := e.modelBreaker(e.priUp, "big")
		for i := range 5 {
			e.pri.set(behaveHang)
			if r := e.call(t, 5*time.Second); r.code != codes.OK || r.reason != route.ReasonHedge {
				t.Fatalf("call %d, tail a guess: %+v, want a hedge's answer", i, r)
			}
			if n := b.Consecutive(); n != 0 {
				t.Fatalf("call %d: %d failures counted after a hedge on a guessed delay, want none", i, n)
			}
			e.pri.set(behaveOK)
			if r := e.call(t, 5*time.Second); r.code != codes.OK || r.server != "primary" {
				t.Fatalf("call %d after the slow one: %+v, want the primary's answer", i, r)
			}
		}
		if b.State() != BreakerClosed {
			t.Fatalf("big's breaker %s after hedges on a guessed delay, want closed", b.State())
		}
		live.Learnt(0, 10*time.Millisecond, route.MinTailCalls)
		e.pri.set(behaveHang)
		e.call(t, 5*time.Second)
		if n := b.Consecutive(); n != 1 {
			t.Errorf("%d failures counted after a call past a known tail's delay, want 1", n)
		}
		for range 2 {
			e.call(t, 5*time.Second)
		}
		if b.State() != BreakerOpen {
			t.Errorf("big's breaker %s after 3 calls past a known tail's delay, want open", b.State())
		}
		if route.MinTailCalls < 1000 || route.MinTailCalls > 2000 {
			t.Errorf("route.MinTailCalls %d: a p99.9 needs about a thousand calls to be bounded", route.MinTailCalls)
		}
	})
}

// TestClientNamesMakeNoBreakers: model names are the client's. Calls the
// server answers make no breaker, whatever the names; a name too long to
// be a label value gets none even when its calls fail.
func TestClientNamesMakeNoBreakers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRouteEnv(t, nil)
		for i := range 50 {
			e.inferModel(t, "client-"+strings.Repeat("x", i))
		}
		long := strings.Repeat("m", 1<<10)
		e.pri.set(behaveError)
		for range 5 {
			e.inferModel(t, long)
		}
		if n := e.router.OnDemandBreakers(); n != 0 {
			t.Errorf("%d breakers made for names clients sent, want none", n)
		}
		_, bs := e.router.Status()
		for _, b := range bs {
			if len(b.Model) > 128 {
				t.Errorf("a breaker named with a %d-byte model name", len(b.Model))
			}
		}
	})
}
