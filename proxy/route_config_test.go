package proxy

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/infergate/infergate/proxy/route"
)

// planYAML decodes a routing file as a front end does (unknown keys are
// errors) and plans it.
func planYAML(t *testing.T, doc string) (*route.Plan, []error) {
	t.Helper()
	var c route.RoutingConfig
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("decode %q: %v", doc, err)
	}
	return c.Plan()
}

// TestRoutingConfigProblems lists every problem of the route schema and
// its message, which names the field as the file spells it.
func TestRoutingConfigProblems(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"no upstream", "routes: []", "upstream: required (the model server's gRPC address, e.g. 127.0.0.1:8001), or upstreams"},
		{"upstream address", "upstream: nowhere", `upstream: "nowhere" is not host:port`},
		{"default breaker", "upstream: a:1\nbreaker: {failure_ratio: 1.5}", "breaker: failure_ratio: must be at most 1, got 1.5"},
		{"default breaker without upstream", "upstreams: [{name: p, address: a:1}]\nbreaker: {probes: -1}", "breaker: probes: must be between 1 and 1000, got -1"},
		{"upstream name", "upstreams: [{address: a:1}]", "upstreams[0].name: required"},
		{"upstream named twice", "upstreams: [{name: p, address: a:1}, {name: p, address: b:1}]", `upstreams[1].name: "p" named twice`},
		{"upstream address of a named one", "upstreams: [{name: p, address: nowhere}]", `upstreams[0].address: "nowhere" is not host:port`},
		{"explicit zero conns", "upstreams: [{name: p, address: a:1, conns: 0}]", "upstreams[0].conns: must be between 1 and 64, got 0"},
		{"negative conns", "upstreams: [{name: p, address: a:1, conns: -2}]", "upstreams[0].conns: must be between 1 and 64, got -2"},
		{"too many conns", "upstreams: [{name: p, address: a:1, conns: 65}]", "upstreams[0].conns: must be between 1 and 64, got 65"},
		{"failure code", "upstreams: [{name: p, address: a:1, breaker: {failure_codes: [SOMETIMES]}}]", `upstreams[0].breaker: failure_codes: unknown gRPC code "SOMETIMES"`},
		{"OK is no failure", "upstreams: [{name: p, address: a:1, breaker: {failure_codes: [ok]}}]", "upstreams[0].breaker: failure_codes: OK is not a failure"},
		{"breaker window", "upstreams: [{name: p, address: a:1, breaker: {window: 10ms}}]", "upstreams[0].breaker: window: must be at least 1s, got 10ms"},
		{"breaker slow call", "upstreams: [{name: p, address: a:1, breaker: {slow_call: -1s}}]", "upstreams[0].breaker: slow_call: must be 0 (off) or positive, got -1s"},
		{"route model", "upstream: a:1\nroutes: [{hedge_after: off}]", "routes[0].model: required"},
		{"route twice", "upstream: a:1\nroutes: [{model: m}, {model: m}]", `routes[m].model: "m" has two routes`},
		{"route upstream", "upstream: a:1\nroutes: [{model: m, upstream: nope}]", `routes[m].upstream: no upstream named "nope" in upstreams`},
		{"fallback upstream and address", "upstreams: [{name: e, address: a:1}]\nroutes: [{model: m, fallback: {upstream: e, address: b:1}}]", "routes[m].fallback: upstream and address are exclusive"},
		{"fallback upstream", "upstream: a:1\nroutes: [{model: m, fallback: {upstream: nope}}]", `routes[m].fallback.upstream: no upstream named "nope" in upstreams`},
		{"fallback address", "upstream: a:1\nroutes: [{model: m, fallback: {address: nowhere}}]", `routes[m].fallback.address: "nowhere" is not host:port`},
		{"fallback to itself", "upstream: a:1\nroutes: [{model: m, fallback: {version: '2'}}]", "routes[m].fallback: needs an upstream, an address or another model name"},
		{"mode", "upstream: a:1\nroutes: [{model: m, mode: edge}]", `routes[m].mode: must be fallback or cascade, got "edge"`},
		{"cascade without fallback", "upstream: a:1\nroutes: [{model: m, mode: cascade, cascade: {output: p, threshold: 0.5}}]", "routes[m].mode: cascade needs a fallback (the edge model)"},
		{"cascade output", "upstream: a:1\nroutes: [{model: m, mode: cascade, fallback: {model: s}}]", "routes[m].cascade.output: required in cascade mode (the edge model's probabilities tensor)"},
		{"cascade threshold", "upstream: a:1\nroutes: [{model: m, mode: cascade, fallback: {model: s}, cascade: {output: p, threshold: 2}}]", "routes[m].cascade.threshold: must be in (0, 1], got 2"},
		{"cascade zero threshold", "upstream: a:1\nroutes: [{model: m, mode: cascade, fallback: {model: s}, cascade: {output: p}}]", "routes[m].cascade.threshold: must be in (0, 1], got 0"},
		{"hedge after", "upstream: a:1\nroutes: [{model: m, hedge_after: soon}]", `routes[m].hedge_after: must be a positive duration (e.g. 100ms), auto or off, got "soon"`},
		{"hedge after zero", "upstream: a:1\nroutes: [{model: m, hedge_after: 0s}]", `routes[m].hedge_after: must be a positive duration (e.g. 100ms), auto or off, got "0s"`},
		{"fallback cycle", "upstream: a:1\nroutes: [{model: a, fallback: {model: b}}, {model: b, fallback: {model: a}}]", "routes[a].fallback.model: fallback cycle a → b → a: a model in trouble would be served by one that falls back to it"},
		{"longer fallback cycle", "upstream: a:1\nroutes: [{model: x, fallback: {model: a}}, {model: a, fallback: {model: b}}, {model: b, fallback: {model: c}}, {model: c, fallback: {model: a}}]", "routes[a].fallback.model: fallback cycle a → b → c → a: a model in trouble would be served by one that falls back to it"},
		{"max in flight", "upstream: a:1\nroutes: [{model: m, max_in_flight: -1}]", "routes[m].max_in_flight: must be 0 (no cap) or positive, got -1"},
		{"budget ratio", "upstream: a:1\nretry_budget: {ratio: 3}", "retry_budget.ratio: must be at most 1, got 3"},
		{"budget floor", "upstream: a:1\nretry_budget: {min_per_second: -1}", "retry_budget.min_per_second: must be positive, got -1"},
		// An explicit 0 would silently mean the default: refused, key by key.
		{"breaker 0 in a row", "upstream: a:1\nbreaker: {consecutive_failures: 0}", "breaker.consecutive_failures: must not be 0 (negative turns it off; leave it out for the default)"},
		{"breaker 0 ratio", "upstreams: [{name: p, address: a:1, breaker: {failure_ratio: 0}}]", "upstreams[0].breaker.failure_ratio: must not be 0 (a share above 0, at most 1; leave it out for the default)"},
		{"breaker 0 calls", "upstream: a:1\nbreaker: {min_calls: 0}", "breaker.min_calls: must not be 0 (a count above 0; leave it out for the default)"},
		{"breaker 0 window", "upstream: a:1\nbreaker: {window: 0s}", "breaker.window: must not be 0 (at least 1s; leave it out for the default)"},
		{"breaker 0 open", "upstream: a:1\nbreaker: {open_for: 0s}", "breaker.open_for: must not be 0 (a duration above 0; leave it out for the default)"},
		{"breaker 0 probes", "upstream: a:1\nbreaker: {probes: 0}", "breaker.probes: must not be 0 (between 1 and 1000; leave it out for the default)"},
		{"breaker 0 slow start", "upstream: a:1\nbreaker: {slow_start: 0s}", "breaker.slow_start: must not be 0 (negative turns it off; leave it out for the default)"},
		{"budget 0 ratio", "upstream: a:1\nretry_budget: {ratio: 0}", "retry_budget.ratio: must not be 0 (negative: no share, only min_per_second; leave it out for the default)"},
		{"budget 0 floor", "upstream: a:1\nretry_budget: {min_per_second: 0}", "retry_budget.min_per_second: must not be 0 (a count above 0; leave it out for the default)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, errs := planYAML(t, tc.yaml)
			if plan != nil {
				t.Error("a plan with problems")
			}
			var got []string
			for _, err := range errs {
				got = append(got, err.Error())
			}
			if !slices.Contains(got, tc.want) {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRoutingConfigZeroInFlightIsNoCap: 0 is no cap for a route's max_in_flight, as for
// the proxy's, and the same as leaving it out.
func TestRoutingConfigZeroInFlightIsNoCap(t *testing.T) {
	for _, doc := range []string{"upstream: a:1\nroutes: [{model: m, max_in_flight: 0}]", "upstream: a:1\nroutes: [{model: m}]"} {
		rt := openYAML(t, doc)
		if got := rt.Router.Routes[0].MaxInFlight; got != 0 {
			t.Errorf("%q: max in flight %d, want 0 (no cap)", doc, got)
		}
	}
}

// fakeDial returns an upstream whose one connection is never used (it
// does no I/O: nothing calls Connect), and records the options of each
// dial by target.
func fakeDial(dialled map[string]UpstreamOptions) func(string, UpstreamOptions) (*Upstream, error) {
	return func(target string, o UpstreamOptions) (*Upstream, error) {
		dialled[target] = o
		cc, err := grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		return NewUpstream(o.Name, cc)
	}
}

// openYAML plans doc and opens it with fakeDial, upstream_conns 2.
func openYAML(t *testing.T, doc string) *Routing {
	t.Helper()
	rt, _ := openYAMLDialled(t, doc)
	return rt
}

func openYAMLDialled(t *testing.T, doc string) (*Routing, map[string]UpstreamOptions) {
	t.Helper()
	plan, errs := planYAML(t, doc)
	if len(errs) > 0 {
		t.Fatalf("%q: %v", doc, errors.Join(errs...))
	}
	dialled := map[string]UpstreamOptions{}
	rt, err := OpenRouting(plan, UpstreamOptions{Conns: 2, MaxMsgSize: 1 << 20}, fakeDial(dialled))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt, dialled
}

// TestRoutePlanOpen checks the one conversion of a file's routes to the
// router's settings.
func TestRoutePlanOpen(t *testing.T) {
	rt, dialled := openYAMLDialled(t, `
upstream: 10.0.0.1:8001
breaker: {slow_call: 1s}
upstreams:
  - name: primary
    address: 10.0.0.2:8001
    conns: 4
    breaker: {consecutive_failures: 3, failure_codes: [UNAVAILABLE, deadline_exceeded]}
  - name: edge
    address: 10.0.0.3:8001
routes:
  - model: resnet50
    upstream: primary
    fallback: {upstream: edge, model: mobilenet_v3}
    hedge_after: 100ms
    max_in_flight: 64
    shed_on_deadline: true
  - model: bert
    mode: cascade
    fallback: {address: 10.0.0.4:8001, model: distilbert, version: "2"}
    cascade: {output: probs, threshold: 0.8}
    idempotent: false
  - model: gpt
    fallback: {address: 10.0.0.3:8001}
    hedge_after: "off"
  - model: tiny
    fallback: {model: tinier}
retry_budget: {ratio: 0.1, min_per_second: 5}
`)
	// One upstream an address: the edge's address as a fallback shares
	// its connections; the default is upstream:.
	if len(rt.Upstreams) != 4 || rt.Default.Name() != "10.0.0.1:8001" || rt.DefaultAddress != "10.0.0.1:8001" {
		t.Fatalf("upstreams %v, default %v at %s", rt.Upstreams, rt.Default.Name(), rt.DefaultAddress)
	}
	byName := map[string]*Upstream{}
	for _, u := range rt.Upstreams {
		byName[u.Name()] = u
	}
	for target, want := range map[string]int{"10.0.0.1:8001": 2, "10.0.0.2:8001": 4, "10.0.0.3:8001": 2, "10.0.0.4:8001": 2} {
		if o := dialled[target]; o.Conns != want || o.MaxMsgSize != 1<<20 {
			t.Errorf("%s dialled with %+v, want %d conns and the given options", target, o, want)
		}
	}
	if bc := rt.Router.Breakers[byName["primary"]]; bc.ConsecutiveFailures != 3 ||
		!slices.Equal(bc.FailureCodes, []codes.Code{codes.Unavailable, codes.DeadlineExceeded}) {
		t.Errorf("primary's breaker %+v", bc)
	}
	if bc := rt.Router.Breakers[rt.Default]; bc.SlowCall != time.Second || len(rt.Router.Breakers) != 2 {
		t.Errorf("breakers %+v", rt.Router.Breakers)
	}
	if rt.Router.Budget != (BudgetConfig{Ratio: 0.1, MinPerSecond: 5}) {
		t.Errorf("budget %+v", rt.Router.Budget)
	}
	r := rt.Router.Routes
	if len(r) != 4 {
		t.Fatalf("routes %+v", r)
	}
	if r[0].Upstream != byName["primary"] || r[0].Fallback.Upstream != byName["edge"] || r[0].Fallback.Model != "mobilenet_v3" ||
		r[0].HedgeAfter != 100*time.Millisecond || r[0].MaxInFlight != 64 || !r[0].ShedOnDeadline || r[0].NonIdempotent || r[0].Cascade != nil {
		t.Errorf("resnet50: %+v", r[0])
	}
	if r[1].Upstream != rt.Default || r[1].Fallback.Upstream != byName["10.0.0.4:8001"] || r[1].Fallback.Version != "2" ||
		r[1].Cascade == nil || *r[1].Cascade != (route.CascadeConfig{Output: "probs", Threshold: 0.8}) || !r[1].NonIdempotent || r[1].HedgeAfter != 0 {
		t.Errorf("bert: %+v", r[1])
	}
	if r[2].Fallback.Upstream != byName["edge"] || r[2].HedgeAfter >= 0 {
		t.Errorf("gpt: %+v", r[2])
	}
	if r[3].Fallback.Upstream != nil || r[3].Fallback.Model != "tinier" {
		t.Errorf("tiny: fallback %+v, want the primary's upstream", r[3].Fallback)
	}
}

// TestRoutingConfigConnsOmittedIsTheDefault: a named upstream without conns
// gets the front end's upstream_conns; an explicit 0 is refused
// (TestRoutingConfigProblems).
func TestRoutingConfigConnsOmittedIsTheDefault(t *testing.T) {
	_, dialled := openYAMLDialled(t, "upstreams: [{name: p, address: a:1}]")
	if got := dialled["a:1"].Conns; got != 2 {
		t.Errorf("conns %d, want the default 2", got)
	}
}

// TestRoutePlanOpenClosesOnError: a failed dial closes what was opened.
func TestRoutePlanOpenClosesOnError(t *testing.T) {
	plan, errs := planYAML(t, "upstreams: [{name: p, address: a:1}, {name: q, address: b:1}]")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var opened []*Upstream
	dial := fakeDial(map[string]UpstreamOptions{})
	_, err := OpenRouting(plan, UpstreamOptions{}, func(target string, o UpstreamOptions) (*Upstream, error) {
		if target == "b:1" {
			return nil, errors.New("refused")
		}
		up, err := dial(target, o)
		opened = append(opened, up)
		return up, err
	})
	if err == nil || err.Error() != "refused" {
		t.Fatalf("error %v, want the dial's", err)
	}
	if len(opened) != 1 || opened[0].Conn().Close() == nil {
		t.Error("the upstream opened before the failure was not closed")
	}
}

// TestNewRouterRefusesBadRoutes: a route built in Go is held to the rules
// of a file's (routeProblems), with the same messages.
func TestNewRouterRefusesBadRoutes(t *testing.T) {
	for _, tc := range []struct {
		rc   route.RouteConfig
		want string
	}{
		{route.RouteConfig{}, "proxy: routes[0].model: required"},
		{route.RouteConfig{Model: "m", Cascade: &route.CascadeConfig{Output: "p", Threshold: 0.5}}, "proxy: routes[m].mode: cascade needs a fallback (the edge model)"},
		{route.RouteConfig{Model: "m", Fallback: &route.FallbackTarget{Model: "s"}, Cascade: &route.CascadeConfig{Threshold: 0.5}},
			"proxy: routes[m].cascade.output: required in cascade mode (the edge model's probabilities tensor)"},
		{route.RouteConfig{Model: "m", MaxInFlight: -1}, "proxy: routes[m].max_in_flight: must be 0 (no cap) or positive, got -1"},
	} {
		r, err := route.NewRouter(route.RouterOptions{Routes: []route.RouteConfig{tc.rc}})
		if err == nil {
			r.Close()
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: error %v, want %q", tc.rc, err, tc.want)
		}
	}
	r, err := route.NewRouter(route.RouterOptions{Routes: []route.RouteConfig{{Model: "m"}, {Model: "m"}}})
	if err == nil {
		r.Close()
	}
	if err == nil || err.Error() != `proxy: routes[m].model: "m" has two routes` {
		t.Errorf("a model routed twice: %v", err)
	}
}

func TestParseFallback(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want route.FallbackSpec
	}{
		{"resnet50=edge:8001", route.FallbackSpec{Address: "edge:8001"}},
		{"resnet50=edge:8001/mobilenet_v3", route.FallbackSpec{Address: "edge:8001", Model: "mobilenet_v3"}},
		{"resnet50=edge:8001/mobilenet_v3:2", route.FallbackSpec{Address: "edge:8001", Model: "mobilenet_v3", Version: "2"}},
	} {
		rs, err := route.ParseFallback(tc.v)
		if err != nil || rs.Model != "resnet50" || rs.Fallback == nil || *rs.Fallback != tc.want {
			t.Errorf("%q: %+v, %v", tc.v, rs, err)
		}
	}
	for v, want := range map[string]string{
		"resnet50":           `"resnet50" is not MODEL=HOST:PORT[/FALLBACK_MODEL[:VERSION]]`,
		"=edge:1":            `"=edge:1" is not MODEL=HOST:PORT[/FALLBACK_MODEL[:VERSION]]`,
		"resnet50=":          `"resnet50=" is not MODEL=HOST:PORT[/FALLBACK_MODEL[:VERSION]]`,
		"resnet50=nowhere/m": `"resnet50=nowhere/m": "nowhere" is not host:port`,
	} {
		if _, err := route.ParseFallback(v); err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %q", v, err, want)
		}
	}
}

// A chain of fallbacks without a loop, and a fallback of the same name on
// another upstream, are no cycles; a cycle is reported once.
func TestFallbackCyclesOnly(t *testing.T) {
	for _, y := range []string{
		"upstreams: [{name: p, address: a:1}, {name: e, address: b:1}]\nroutes: [{model: a, fallback: {model: b}}, {model: b, fallback: {model: c}}, {model: c}]",
		"upstreams: [{name: p, address: a:1}, {name: e, address: b:1}]\nroutes: [{model: a, fallback: {upstream: e}}, {model: b, fallback: {upstream: e, model: b}}]",
	} {
		if _, errs := planYAML(t, y); len(errs) != 0 {
			t.Errorf("%s: %v", y, errs)
		}
	}
	_, errs := planYAML(t, "upstream: a:1\nroutes: [{model: a, fallback: {model: b}}, {model: b, fallback: {model: a}}]")
	if len(errs) != 1 {
		t.Errorf("a → b → a: %d problems, want 1: %v", len(errs), errs)
	}
	if _, err := route.NewRouter(route.RouterOptions{Routes: []route.RouteConfig{{Model: "a", Fallback: &route.FallbackTarget{Model: "b"}}, {Model: "b", Fallback: &route.FallbackTarget{Model: "a"}}}}); err == nil || !strings.Contains(err.Error(), "fallback cycle a → b → a") {
		t.Errorf("route.NewRouter = %v, want the cycle refused", err)
	}
}

// An upstream of several endpoints: on the flag as a comma list, in YAML
// as endpoints; each endpoint must be host:port, address and endpoints
// are exclusive, and balance names one of the pickers.
func TestPlanEndpoints(t *testing.T) {
	p, errs := route.RoutingConfig{Upstream: "10.0.0.1:8001,10.0.0.2:8001"}.Plan()
	if len(errs) > 0 {
		t.Fatalf("comma list refused: %v", errs)
	}
	if _, addr := p.Default(); addr != "10.0.0.1:8001,10.0.0.2:8001" {
		t.Errorf("default address %q", addr)
	}
	p, errs = route.RoutingConfig{Upstreams: []route.UpstreamSpec{{Name: "pool", Endpoints: []string{"a:1", "b:1", "c:1"}, Balance: "round_robin"}}}.Plan()
	if len(errs) > 0 {
		t.Fatalf("endpoints refused: %v", errs)
	}
	if pu := p.Upstreams[0]; pu.Address != "a:1,b:1,c:1" || pu.Balance != BalanceRoundRobin {
		t.Errorf("planned %+v", pu)
	}
	for _, tc := range []struct {
		cfg  route.RoutingConfig
		want string
	}{
		{route.RoutingConfig{Upstream: "a:1,dns:///b:1"}, `upstream: endpoint "dns:///b:1" of "a:1,dns:///b:1" is not host:port`},
		{route.RoutingConfig{Upstreams: []route.UpstreamSpec{{Name: "p", Endpoints: []string{"a:1", "b"}}}}, `upstreams[0].endpoints[1]: "b" is not host:port`},
		{route.RoutingConfig{Upstreams: []route.UpstreamSpec{{Name: "p", Address: "a:1", Endpoints: []string{"b:1"}}}}, "upstreams[0]: address and endpoints: give one"},
		{route.RoutingConfig{Upstreams: []route.UpstreamSpec{{Name: "p", Address: "a:1", Balance: "fastest"}}}, `upstreams[0].balance: "fastest" is not one of latency, least_request, round_robin`},
	} {
		_, errs := tc.cfg.Plan()
		if len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.cfg, errs, tc.want)
		}
	}
}
