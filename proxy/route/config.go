package route

import (
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proxy/pool"
)

// RoutingConfig is the routing part of a YAML file, at its top level (a
// front end embeds it inline): the default upstream and its breaker, the
// named upstreams, per-model routes and the retry budget. Plan checks it
// and converts it to the router's settings in one pass, without I/O;
// proxy.OpenRouting then dials the upstreams.
//
// Its zero value is the defaults, so there is nothing to set before
// decoding: where 0 is a valid setting it means what leaving the key out
// means (max_in_flight: no cap; a breaker's or the budget's fields:
// their defaults), and the one field whose 0 is refused while its
// absence is not, upstreams[].conns, is a pointer.
type RoutingConfig struct {
	// Upstream is the default model server's gRPC address (Triton :8001,
	// TF-Serving :8500), or its replicas' addresses separated by commas
	// (one upstream of several endpoints). Required unless Upstreams are
	// given.
	Upstream string `yaml:"upstream"`
	// Upstreams are named model servers for routes; the first is the
	// default upstream when Upstream is empty.
	Upstreams []UpstreamSpec `yaml:"upstreams"`
	// AffinityHeader names a request header whose value keeps a client's
	// calls on one endpoint of a pool (Upstream's, and the named ones'
	// that set none); empty: none.
	AffinityHeader string `yaml:"affinity_header"`
	// Breaker turns on the circuit breaker of Upstream (named upstreams
	// carry their own); it is checked but unused without Upstream.
	Breaker *BreakerSpec `yaml:"breaker"`
	// Routes are per-model routes: fallback, cascade, shedding, hedging.
	Routes []RouteSpec `yaml:"routes"`
	// RetryBudget bounds retries and hedges.
	RetryBudget RetryBudgetSpec `yaml:"retry_budget"`
}

// UpstreamSpec is one named model server (upstreams:).
type UpstreamSpec struct {
	// Name is the upstream's name in routes and its metric label.
	// Required, and unique.
	Name string `yaml:"name"`
	// Address is its gRPC host:port. Give it or Endpoints.
	Address string `yaml:"address"`
	// Endpoints are the host:port of each of its replicas: each call goes
	// to one of them, as Balance picks.
	Endpoints []string `yaml:"endpoints"`
	// Balance is how a call's endpoint is picked: latency (the
	// default), least_request or round_robin.
	Balance string `yaml:"balance"`
	// SlowStart is how long a new or returning endpoint takes to reach
	// its full share of calls, from a tenth; default 5s, negative off.
	SlowStart *time.Duration `yaml:"slow_start"`
	// AffinityHeader names a request header whose value keeps a
	// client's calls on one endpoint (package pool); default the top
	// level's affinity_header.
	AffinityHeader string `yaml:"affinity_header"`
	// Conns is the number of pooled connections, 1 to pool.MaxConns.
	// Nil (the key left out) means the front end's default, upstream_conns.
	// It is a pointer because that default is known only once the flags
	// are applied, after decoding, so it cannot be set beforehand as other
	// defaults are; nil is how an explicit 0 (refused) differs from none.
	Conns *int `yaml:"conns"`
	// Breaker turns on its circuit breaker with these settings. A route's
	// primary and its fallback get one with the defaults anyway.
	Breaker *BreakerSpec `yaml:"breaker"`
}

// BreakerSpec is BreakerConfig as a YAML file spells it: durations such as
// "2s", failure codes by name. A key left out means BreakerConfig's
// default; the pointers tell an explicit 0, refused where 0 would only
// mean the default, from a key left out.
type BreakerSpec struct {
	// ConsecutiveFailures opens it after so many failures in a row;
	// negative off.
	ConsecutiveFailures *int           `yaml:"consecutive_failures"`
	FailureRatio        *float64       `yaml:"failure_ratio"`
	MinCalls            *int           `yaml:"min_calls"`
	Window              *time.Duration `yaml:"window"`
	// SlowCall: a slower answer is a failure; 0 (the default) none.
	SlowCall time.Duration  `yaml:"slow_call"`
	OpenFor  *time.Duration `yaml:"open_for"`
	Probes   *int           `yaml:"probes"`
	// SlowStart ramps calls back after closing; default open_for/2,
	// negative off.
	SlowStart *time.Duration `yaml:"slow_start"`
	// FailureCodes are gRPC code names in any case, with or without
	// underscores (UNAVAILABLE, Internal, deadline_exceeded).
	FailureCodes []string `yaml:"failure_codes"`
}

// RouteSpec is one model's route (routes:), RouteConfig as a YAML file
// spells it: upstreams by name or address.
type RouteSpec struct {
	// Model is the model name clients send. Required, one route each.
	Model string `yaml:"model"`
	// Upstream names the primary among upstreams; empty means the
	// default upstream.
	Upstream string `yaml:"upstream"`
	// Fallback is the lighter model used while the primary is in trouble.
	Fallback *FallbackSpec `yaml:"fallback"`
	// Mode is "fallback" (the default) or "cascade" (edge first).
	Mode string `yaml:"mode"`
	// Cascade configures cascade mode; it is ignored in fallback mode.
	Cascade *CascadeSpec `yaml:"cascade"`
	// HedgeAfter is a positive duration, "auto" (the default: see
	// RouteConfig.HedgeAfter) or "off".
	HedgeAfter string `yaml:"hedge_after"`
	// Idempotent (default true): false means never sent twice.
	Idempotent *bool `yaml:"idempotent"`
	// MaxInFlight caps the model's calls in progress; 0 (the default)
	// means no cap, as the proxy-wide max_in_flight's 0 does.
	MaxInFlight int `yaml:"max_in_flight"`
	// ShedOnDeadline rejects calls whose deadline is shorter than the
	// primary's median latency (or sends them to the fallback).
	ShedOnDeadline bool `yaml:"shed_on_deadline"`
}

// FallbackSpec names a route's fallback: an upstream by name or an
// address (exclusive; neither means the primary's), and a model name
// (default: the same) and version (default: none).
type FallbackSpec struct {
	Upstream string `yaml:"upstream"`
	Address  string `yaml:"address"`
	Model    string `yaml:"model"`
	Version  string `yaml:"version"`
}

// CascadeSpec is CascadeConfig as a YAML file spells it.
type CascadeSpec struct {
	Output    string  `yaml:"output"`
	Threshold float64 `yaml:"threshold"`
}

// RetryBudgetSpec is BudgetConfig as a YAML file spells it; a key left out
// means BudgetConfig's default, an explicit 0 is refused.
type RetryBudgetSpec struct {
	// Ratio is the share of first tries that may be tried again; negative:
	// none beyond MinPerSecond.
	Ratio        *float64 `yaml:"ratio"`
	MinPerSecond *int     `yaml:"min_per_second"`
}

// explicit reads a setting a file may leave out (nil: 0, which the
// config's withDefaults turns into the default) but not set to 0, which
// would silently mean that default too; docs/configuration.md's rule. hint says what
// the user may have meant.
func explicit[T int | float64 | time.Duration](v *T, field, hint string, errs *[]error) T {
	if v == nil {
		return 0
	}
	if *v == 0 {
		*errs = append(*errs, fmt.Errorf("%s: must not be 0 (%s; leave it out for the default)", field, hint))
	}
	return *v
}

// Plan is a RoutingConfig checked and converted: the router's settings
// over upstreams that are still addresses. proxy.OpenRouting dials them.
type Plan struct {
	Upstreams []PlannedUpstream // the default upstream first
	Routes    []PlannedRoute
	Budget    BudgetConfig
}

// PlannedUpstream is one upstream to dial, once.
type PlannedUpstream struct {
	Name, Address string
	Balance       pool.Balance
	SlowStart     time.Duration
	Affinity      string         // the affinity header; "" none
	Conns         int            // 0: the dialler's default
	Breaker       *BreakerConfig // nil: none configured
}

// PlannedRoute is a route whose upstreams are indices in the plan's
// Upstreams: Primary 0 is the default upstream, Fallback -1 the primary's.
type PlannedRoute struct {
	Config            RouteConfig
	Primary, Fallback int
}

// Plan checks c and converts it to the router's settings in one pass. The
// problems name each bad field as the file spells it
// ("routes[resnet50].hedge_after: ..."); the plan is nil when there are
// any. It does no I/O.
func (c RoutingConfig) Plan() (*Plan, []error) {
	p := &Plan{}
	var errs []error
	bad := func(at, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
	}
	byAddr := map[string]int{}
	add := func(u PlannedUpstream) int {
		p.Upstreams = append(p.Upstreams, u)
		byAddr[u.Address] = len(p.Upstreams) - 1
		return len(p.Upstreams) - 1
	}
	var defBreaker *BreakerConfig
	if c.Breaker != nil {
		bc, berrs := c.Breaker.config("breaker")
		defBreaker, errs = &bc, append(errs, berrs...)
	}
	switch {
	case c.Upstream != "":
		if err := endpointList(c.Upstream); err != nil {
			bad("upstream", "%v", err)
		}
		add(PlannedUpstream{Name: c.Upstream, Address: c.Upstream, Breaker: defBreaker, Affinity: strings.ToLower(c.AffinityHeader)})
	case len(c.Upstreams) == 0:
		bad("upstream", "required (the model server's gRPC address, e.g. 127.0.0.1:8001), or upstreams")
	}
	if err := grpcwire.CheckClientHeader(c.AffinityHeader); err != nil {
		bad("affinity_header", "%v", err)
	}
	byName := map[string]int{}
	for i, u := range c.Upstreams {
		f := fmt.Sprintf("upstreams[%d]", i)
		pu, uerrs := u.plan(f)
		errs = append(errs, uerrs...)
		if pu.Affinity == "" {
			pu.Affinity = strings.ToLower(c.AffinityHeader)
		}
		if _, twice := byName[u.Name]; twice && u.Name != "" {
			bad(f+".name", "%q named twice", u.Name)
		}
		byName[u.Name] = add(pu)
	}
	routes := make([]RouteConfig, 0, len(c.Routes))
	for i, r := range c.Routes {
		f := routeField(i, r.Model)
		pr, rerrs := r.plan(f, byName)
		errs = append(errs, rerrs...)
		if fb := r.Fallback; fb != nil && fb.Upstream == "" && fb.Address != "" {
			// A fallback address shares the connections of an upstream
			// already at that address; else it is dialled on its own.
			i, ok := byAddr[fb.Address]
			if !ok {
				i = add(PlannedUpstream{Name: fb.Address, Address: fb.Address})
			}
			pr.Fallback = i
		}
		p.Routes = append(p.Routes, pr)
		routes = append(routes, pr.Config)
	}
	errs = append(errs, routeProblems(routes)...)
	var berrs []error
	p.Budget, berrs = c.RetryBudget.config("retry_budget")
	if errs = append(errs, berrs...); len(errs) > 0 {
		return nil, errs
	}
	return p, nil
}

// plan converts u; its problems name field ("upstreams[0]").
func (u UpstreamSpec) plan(field string) (PlannedUpstream, []error) {
	var errs []error
	if u.Name == "" {
		errs = append(errs, fmt.Errorf("%s.name: required", field))
	}
	pu := PlannedUpstream{Name: u.Name, Address: u.Address}
	switch {
	case u.Address != "" && len(u.Endpoints) > 0:
		errs = append(errs, fmt.Errorf("%s: address and endpoints: give one", field))
	case len(u.Endpoints) > 0:
		for i, e := range u.Endpoints {
			if !pool.PlainHostPort(e) {
				errs = append(errs, fmt.Errorf("%s.endpoints[%d]: %q is not host:port", field, i, e))
			}
		}
		pu.Address = strings.Join(u.Endpoints, ",")
	default:
		if err := endpointList(u.Address); err != nil {
			errs = append(errs, fmt.Errorf("%s.address: %w", field, err))
		}
	}
	var err error
	if pu.Balance, err = pool.ParseBalance(u.Balance); err != nil {
		errs = append(errs, fmt.Errorf("%s.balance: %w", field, err))
	}
	pu.Affinity = strings.ToLower(u.AffinityHeader)
	if err := grpcwire.CheckClientHeader(u.AffinityHeader); err != nil {
		errs = append(errs, fmt.Errorf("%s.affinity_header: %w", field, err))
	}
	if u.SlowStart != nil {
		if pu.SlowStart = *u.SlowStart; pu.SlowStart == 0 {
			pu.SlowStart = -1 // 0s written: none
		}
	}
	if u.Conns != nil {
		if pu.Conns = *u.Conns; pu.Conns < 1 || pu.Conns > pool.MaxConns {
			errs = append(errs, fmt.Errorf("%s.conns: must be between 1 and %d, got %d", field, pool.MaxConns, pu.Conns))
		}
	}
	if u.Breaker != nil {
		bc, berrs := u.Breaker.config(field + ".breaker")
		pu.Breaker, errs = &bc, append(errs, berrs...)
	}
	return pu, errs
}

// config converts b; its problems name field ("upstreams[0].breaker")
// and then BreakerConfig's field, as Validate does
// ("upstreams[0].breaker: window: must be at least 1s, got 10ms").
func (b BreakerSpec) config(field string) (BreakerConfig, []error) {
	var errs []error
	bc := BreakerConfig{
		ConsecutiveFailures: explicit(b.ConsecutiveFailures, field+".consecutive_failures", "negative turns it off", &errs),
		FailureRatio:        explicit(b.FailureRatio, field+".failure_ratio", "a share above 0, at most 1", &errs),
		MinCalls:            explicit(b.MinCalls, field+".min_calls", "a count above 0", &errs),
		Window:              explicit(b.Window, field+".window", "at least 1s", &errs),
		SlowCall:            b.SlowCall,
		OpenFor:             explicit(b.OpenFor, field+".open_for", "a duration above 0", &errs),
		Probes:              explicit(b.Probes, field+".probes", "between 1 and 1000", &errs),
		SlowStart:           explicit(b.SlowStart, field+".slow_start", "negative turns it off", &errs),
	}
	if len(errs) > 0 {
		return bc, errs
	}
	for _, name := range b.FailureCodes {
		code, ok := codeByName(name)
		if !ok {
			return bc, []error{fmt.Errorf("%s: failure_codes: unknown gRPC code %q", field, name)}
		}
		bc.FailureCodes = append(bc.FailureCodes, code)
	}
	if err := bc.Validate(); err != nil {
		return bc, []error{fmt.Errorf("%s: %w", field, err)}
	}
	return bc, nil
}

// plan converts r but its fallback address (Plan resolves that); its
// problems name field ("routes[resnet50]"). What RouteConfig itself can
// say (model, cascade, max_in_flight) routeProblems checks.
func (r RouteSpec) plan(field string, byName map[string]int) (PlannedRoute, []error) {
	var errs []error
	bad := func(at, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
	}
	pr := PlannedRoute{Primary: 0, Fallback: -1, Config: RouteConfig{
		Model: r.Model, MaxInFlight: r.MaxInFlight, ShedOnDeadline: r.ShedOnDeadline,
		NonIdempotent: r.Idempotent != nil && !*r.Idempotent,
	}}
	if r.Upstream != "" {
		i, ok := byName[r.Upstream]
		if !ok {
			bad(field+".upstream", "no upstream named %q in upstreams", r.Upstream)
		}
		pr.Primary = i
	}
	if fb := r.Fallback; fb != nil {
		pr.Config.Fallback = &FallbackTarget{Model: fb.Model, Version: fb.Version}
		switch {
		case fb.Upstream != "" && fb.Address != "":
			bad(field+".fallback", "upstream and address are exclusive")
		case fb.Upstream != "":
			i, ok := byName[fb.Upstream]
			if !ok {
				bad(field+".fallback.upstream", "no upstream named %q in upstreams", fb.Upstream)
			}
			pr.Fallback = i
		case fb.Address != "":
			if err := hostPort(fb.Address); err != nil {
				bad(field+".fallback.address", "%v", err)
			}
		case fb.Model == "":
			bad(field+".fallback", "needs an upstream, an address or another model name")
		}
	}
	switch r.Mode {
	case "", "fallback":
	case "cascade":
		pr.Config.Cascade = &CascadeConfig{}
		if r.Cascade != nil {
			pr.Config.Cascade = &CascadeConfig{Output: r.Cascade.Output, Threshold: r.Cascade.Threshold}
		}
	default:
		bad(field+".mode", "must be fallback or cascade, got %q", r.Mode)
	}
	var err error
	if pr.Config.HedgeAfter, err = parseHedgeAfter(r.HedgeAfter); err != nil {
		bad(field+".hedge_after", "%v", err)
	}
	return pr, errs
}

// config converts b; its problems name field ("retry_budget").
func (b RetryBudgetSpec) config(field string) (BudgetConfig, []error) {
	var errs []error
	bc := BudgetConfig{
		Ratio:        explicit(b.Ratio, field+".ratio", "negative: no share, only min_per_second", &errs),
		MinPerSecond: explicit(b.MinPerSecond, field+".min_per_second", "a count above 0", &errs),
	}
	if bc.Ratio > 1 {
		errs = append(errs, fmt.Errorf("%s.ratio: must be at most 1, got %v", field, bc.Ratio))
	}
	if bc.MinPerSecond < 0 {
		errs = append(errs, fmt.Errorf("%s.min_per_second: must be positive, got %d", field, bc.MinPerSecond))
	}
	return bc, errs
}

// routeProblems is the one check of what RouteConfigs say themselves:
// each model routed once, a cascade's fallback, output and threshold, the
// in-flight cap. Plan reports its problems with the spec's, and NewRouter
// refuses routes that have any, so that a route built in Go is held to
// the rules a file's is. Fields are named as the YAML file spells them.
func routeProblems(routes []RouteConfig) []error {
	var errs []error
	bad := func(at, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
	}
	models := map[string]bool{}
	for i, rc := range routes {
		f := routeField(i, rc.Model)
		switch {
		case rc.Model == "":
			bad(f+".model", "required")
		case models[rc.Model]:
			bad(f+".model", "%q has two routes", rc.Model)
		}
		models[rc.Model] = true
		if cc := rc.Cascade; cc != nil {
			switch {
			case rc.Fallback == nil:
				bad(f+".mode", "cascade needs a fallback (the edge model)")
			case cc.Output == "":
				bad(f+".cascade.output", "required in cascade mode (the edge model's probabilities tensor)")
			case cc.Threshold <= 0 || cc.Threshold > 1:
				bad(f+".cascade.threshold", "must be in (0, 1], got %v", cc.Threshold)
			}
		}
		if err := InFlightCapProblem(rc.MaxInFlight); err != nil {
			errs = append(errs, fmt.Errorf("%s.%w", f, err))
		}
	}
	return append(errs, fallbackCycles(routes)...)
}

// fallbackCycles finds the cycles among fallback routes: a route whose
// fallback model has a route whose fallback leads back to it (a → b → a),
// so a model in trouble would be served by a model that falls back to
// it. A fallback of the same name (on another upstream) is not an edge.
// Each cycle is reported once, at its first route in file order.
func fallbackCycles(routes []RouteConfig) []error {
	next := map[string]string{} // model → its fallback model, when that has a route
	index := map[string]int{}
	for i, rc := range routes {
		if _, twice := index[rc.Model]; !twice {
			index[rc.Model] = i
		}
	}
	for _, rc := range routes {
		if fb := rc.Fallback; fb != nil && fb.Model != "" && fb.Model != rc.Model {
			if _, routed := index[fb.Model]; routed {
				next[rc.Model] = fb.Model
			}
		}
	}
	var errs []error
	reported := map[string]bool{}
	for i, rc := range routes {
		path := []string{rc.Model}
		seen := map[string]bool{rc.Model: true}
		for m, ok := next[rc.Model]; ok; m, ok = next[m] {
			if m == rc.Model {
				if !reported[rc.Model] {
					for _, p := range path {
						reported[p] = true
					}
					errs = append(errs, fmt.Errorf("%s.fallback.model: fallback cycle %s → %s: a model in trouble would be served by one that falls back to it",
						routeField(i, rc.Model), strings.Join(path, " → "), rc.Model))
				}
				break
			}
			if seen[m] {
				break // a cycle further on, reported at its own routes
			}
			seen[m] = true
			path = append(path, m)
		}
	}
	return errs
}

// InFlightCapProblem checks a max_in_flight, the proxy's or a route's:
// 0 means no cap, as documented for both.
func InFlightCapProblem(n int) error {
	if n < 0 {
		return fmt.Errorf("max_in_flight: must be 0 (no cap) or positive, got %d", n)
	}
	return nil
}

// routeField names route i in problems: by its model when it has one, as
// a reader finds it in the file, else by its index.
func routeField(i int, model string) string {
	if model != "" {
		return fmt.Sprintf("routes[%s]", model)
	}
	return fmt.Sprintf("routes[%d]", i)
}

// parseHedgeAfter reads hedge_after: "" or "auto" is 0 (automatic), "off"
// is negative, else a positive duration.
func parseHedgeAfter(v string) (time.Duration, error) {
	switch v {
	case "", "auto":
		return 0, nil
	case "off":
		return -1, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("must be a positive duration (e.g. 100ms), auto or off, got %q", v)
	}
	return d, nil
}

// codeByName reads a gRPC code name in any case, with or without
// underscores ("DEADLINE_EXCEEDED", "DeadlineExceeded").
func codeByName(name string) (codes.Code, bool) {
	want := strings.ReplaceAll(strings.ToLower(name), "_", "")
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if strings.ToLower(c.String()) == want {
			return c, true
		}
	}
	return 0, false
}

// endpointList checks an upstream's address: one target, or several
// host:port separated by commas (its endpoints). It only parses.
func endpointList(addr string) error {
	if !strings.Contains(addr, ",") {
		return hostPort(addr)
	}
	for _, a := range strings.Split(addr, ",") {
		if !pool.PlainHostPort(a) {
			return fmt.Errorf("endpoint %q of %q is not host:port", a, addr)
		}
	}
	return nil
}

// hostPort checks an upstream address, host:port or dns:///host:port (a
// pool of the name's addresses); it only parses, it resolves nothing.
func hostPort(addr string) error {
	if _, _, ok := pool.DNSTarget(addr); ok {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	return nil
}

// ParseFallback reads the one-line spelling of a route with a fallback
// that infergate's --fallback flag takes,
// MODEL=HOST:PORT[/FALLBACK_MODEL[:VERSION]]: a fallback address and,
// optionally, another model name and a version.
func ParseFallback(v string) (RouteSpec, error) {
	model, rest, ok := strings.Cut(v, "=")
	if !ok || model == "" || rest == "" {
		return RouteSpec{}, fmt.Errorf("%q is not MODEL=HOST:PORT[/FALLBACK_MODEL[:VERSION]]", v)
	}
	addr, fbModel, _ := strings.Cut(rest, "/")
	if err := hostPort(addr); err != nil {
		return RouteSpec{}, fmt.Errorf("%q: %w", v, err)
	}
	fb := &FallbackSpec{Address: addr}
	if fbModel != "" {
		fb.Model, fb.Version, _ = strings.Cut(fbModel, ":")
	}
	return RouteSpec{Model: model, Fallback: fb}, nil
}

// Default is the default upstream's name and address as planned; "" when
// there is none.
func (p *Plan) Default() (name, address string) {
	if p == nil || len(p.Upstreams) == 0 {
		return "", ""
	}
	return p.Upstreams[0].Name, p.Upstreams[0].Address
}
