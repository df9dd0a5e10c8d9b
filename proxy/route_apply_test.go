package proxy

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/infergate/infergate/proxy/route"
)

// plan is planYAML without problems, as a reload gets it.
func plan(t *testing.T, doc string) *route.Plan {
	t.Helper()
	p, errs := planYAML(t, doc)
	if len(errs) > 0 {
		t.Fatalf("plan: %v", errs)
	}
	return p
}

const applyBefore = `
upstream: pri:1
upstreams:
  - {name: edge, address: edge:1}
routes:
  - model: resnet50
    fallback: {upstream: edge, model: mobilenet_v3}
`

// A reload's new table: the new fallback routes the calls; the primary's
// breaker, the budget, the model's forced mode, the alert holding it and
// its counters carry over; the unchanged upstreams keep their
// connections and nothing is dialled again.
func TestRouterApplyCarriesState(t *testing.T) {
	rt := openYAML(t, applyBefore)
	r, err := route.NewRouter(rt.Router)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.SetForced("resnet50", route.ForceFallback); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start("fallback", map[string]string{"model": "resnet50", "alertname": "Slow"}); err != nil {
		t.Fatal(err)
	}
	oldBreaker := r.Breaker(rt.Default, "resnet50")
	oldConn := r.Breaker(rt.Default, "")
	oldBudget := r.Budget()
	if oldBreaker == nil || oldBreaker.Conn() != oldConn || oldConn == nil {
		t.Fatalf("resnet50's breaker %p watches %p, want its upstream's breaker %p", oldBreaker, oldBreaker.Conn(), oldConn)
	}
	r.Route("resnet50").Live().Counters.Primary.Add(7)

	dialled := map[string]UpstreamOptions{}
	next, dropped, err := ReopenRouting(plan(t, strings.Replace(applyBefore, "mobilenet_v3", "efficientnet", 1)), rt, UpstreamOptions{Conns: 2}, fakeDial(dialled))
	if err != nil {
		t.Fatal(err)
	}
	if len(dialled) != 0 || len(dropped) != 0 || next.Upstreams[1] != rt.Upstreams[1] {
		t.Fatalf("unchanged upstreams: dialled %v, dropped %v; want their connections kept", dialled, dropped)
	}
	if err := r.Apply(next.Router); err != nil {
		t.Fatal(err)
	}
	mr := r.Route("resnet50")
	if routes, _ := r.Status(); !strings.HasPrefix(routes[0].Fallback, "efficientnet") {
		t.Errorf("fallback after Apply: %q, want efficientnet", routes[0].Fallback)
	}
	if r.Breaker(rt.Default, "") != oldConn || r.Breaker(rt.Default, "resnet50") != oldBreaker || r.Budget() != oldBudget {
		t.Errorf("the primary's breaker or the budget was made anew for an unchanged configuration")
	}
	if mr.Forced() != route.ForceFallback || mr.Alert() != "Slow" || mr.Live().Counters.Primary.Load() != 7 {
		t.Errorf("route state after Apply: forced %q alert %q primary calls %d; want fallback, Slow, 7", mr.Forced(), mr.Alert(), mr.Live().Counters.Primary.Load())
	}
	if mr.PrimaryBreaker() != oldBreaker {
		t.Errorf("the route is not linked to the carried breaker")
	}
}

// A route that loses its fallback cannot stay forced onto it nor held
// there by an alert; a bad table is refused and the running one stays; a
// changed breaker setting makes a new breaker; an upstream no longer used
// is named for closing.
func TestRouterApplyDropsWhatNoLongerFits(t *testing.T) {
	rt := openYAML(t, applyBefore)
	r, err := route.NewRouter(rt.Router)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetForced("resnet50", route.ForceFallback)
	r.Start("fallback", map[string]string{"model": "resnet50", "alertname": "Slow"})
	before, beforeConn := r.Route("resnet50"), r.Breaker(rt.Default, "")

	bad := rt.Router
	bad.Routes = append(append([]route.RouteConfig{}, bad.Routes...), bad.Routes[0])
	if err := r.Apply(bad); err == nil || !strings.Contains(err.Error(), "two routes") {
		t.Errorf("Apply of two routes for one model: %v, want refused", err)
	}
	if r.Route("resnet50") != before {
		t.Errorf("a refused Apply replaced the table")
	}

	doc := `
upstream: pri:1
breaker: {consecutive_failures: 3}
routes:
  - model: resnet50
`
	next, dropped, err := ReopenRouting(plan(t, doc), rt, UpstreamOptions{Conns: 2}, fakeDial(map[string]UpstreamOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || dropped[0] != rt.Upstreams[1] {
		t.Errorf("dropped %v, want the edge upstream", dropped)
	}
	if err := r.Apply(next.Router); err != nil {
		t.Fatal(err)
	}
	mr := r.Route("resnet50")
	if mr.Forced() != route.ForceAuto || mr.Alert() != "" {
		t.Errorf("a route without a fallback: forced %q alert %q, want auto and none", mr.Forced(), mr.Alert())
	}
	if r.Breaker(rt.Default, "") == beforeConn {
		t.Errorf("a changed breaker setting kept the old breaker")
	}
}

// A reload keeps the breaker a model without a route got at its first
// call (open here: its calls still fail fast) while its upstream's breaker
// carries over; one whose model now has a route gives way to the route's.
func TestRouterApplyCarriesFirstCallBreakers(t *testing.T) {
	rt := openYAML(t, applyBefore)
	r, err := route.NewRouter(rt.Router)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	other := r.DirectedBreaker(rt.Default, "other")
	if other == nil || other.Conn() != r.Breaker(rt.Default, "") {
		t.Fatalf("other's breaker %v, want one watching its upstream's", other)
	}
	for range 5 { // the default ConsecutiveFailures
		other.Record(route.VerdictFailed)
	}
	if other.State() != BreakerOpen {
		t.Fatalf("other's breaker %s after 5 failures, want open", other.State())
	}
	soon := r.DirectedBreaker(rt.Default, "soon-routed")
	next := plan(t, applyBefore+"  - model: soon-routed\n    fallback: {upstream: edge, model: mobilenet_v3}\n")
	reopened, _, err := ReopenRouting(next, rt, UpstreamOptions{Conns: 2}, fakeDial(map[string]UpstreamOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(reopened.Router); err != nil {
		t.Fatal(err)
	}
	if got := r.DirectedBreaker(rt.Default, "other"); got != other || got.State() != BreakerOpen {
		t.Errorf("after Apply other's breaker is %p (%v), want the carried %p, open", got, got.State(), other)
	}
	if b := r.Breaker(rt.Default, "soon-routed"); b == nil || b == soon || b != r.Route("soon-routed").PrimaryBreaker() {
		t.Error("a model that gained a route keeps its first-call breaker instead of the route's")
	}
	if n := r.OnDemandBreakers(); n != 1 {
		t.Errorf("%d first-call breakers counted, want 1", n)
	}
}

// A reload that changes only a named pool's list of endpoints keeps the
// upstream and the endpoints still listed (their connections, what the
// picker learned) and dials only the new one; the slow start is read
// from YAML.
func TestReopenChangesNamedPoolLive(t *testing.T) {
	doc := func(eps string) string {
		return "upstream: pri:1\nupstreams:\n  - {name: pool, endpoints: [" + eps + "], slow_start: 2s}\n" +
			"routes:\n  - model: resnet50\n    upstream: pool\n"
	}
	rt, err := OpenRouting(plan(t, doc("127.0.0.1:1, 127.0.0.1:2")), UpstreamOptions{Conns: 1}, DialUpstream)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	pool := rt.Upstreams[1]
	if pool.SlowStart() != 2*time.Second {
		t.Errorf("slow_start: %s, want 2s", pool.SlowStart())
	}
	kept, removed := pool.Endpoints()[0], pool.Endpoints()[1]
	next, dropped, err := ReopenRouting(plan(t, doc("127.0.0.1:1, 127.0.0.1:3")), rt, UpstreamOptions{Conns: 1}, DialUpstream)
	if err != nil {
		t.Fatal(err)
	}
	if next.Upstreams[1] != pool || len(dropped) != 0 {
		t.Fatalf("the pool was dialled again (dropped %v), want it kept with its new endpoints", dropped)
	}
	eps := pool.Endpoints()
	if len(eps) != 2 || eps[0] != kept || eps[1].Address() != "127.0.0.1:3" {
		t.Fatalf("endpoints after the reload: %v, want 127.0.0.1:1 kept and 127.0.0.1:3", eps)
	}
	if a := pool.Address(); a != "127.0.0.1:1,127.0.0.1:3" {
		t.Errorf("address %q", a)
	}
	// Changing it back again goes through the same way: the key follows.
	if next2, dropped, err := ReopenRouting(plan(t, doc("127.0.0.1:1, 127.0.0.1:3")), next, UpstreamOptions{Conns: 1}, DialUpstream); err != nil ||
		next2.Upstreams[1] != pool || len(dropped) != 0 {
		t.Errorf("an unchanged reload: %v, dropped %v", err, dropped)
	}
	// The removed endpoint, with no call in flight, closes after its
	// grace.
	for removed.Conns()[0].GetState() != connectivity.Shutdown {
		time.Sleep(10 * time.Millisecond)
	}
}
