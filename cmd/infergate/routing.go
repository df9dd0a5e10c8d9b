package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proxy"
)

// UpstreamConfig is one named model server (YAML upstreams:).
type UpstreamConfig struct {
	// Name is the upstream's name in routes and its metric label.
	Name string `yaml:"name"`
	// Address is its gRPC host:port.
	Address string `yaml:"address"`
	// Conns is the number of pooled connections; default upstream_conns.
	Conns int `yaml:"conns"`
	// Breaker turns on its circuit breaker with these settings. A route's
	// primary and its fallback get one with the defaults anyway.
	Breaker *BreakerYAML `yaml:"breaker"`
}

// BreakerYAML is proxy.BreakerConfig as the YAML file spells it.
type BreakerYAML struct {
	ConsecutiveFailures int           `yaml:"consecutive_failures"`
	FailureRatio        float64       `yaml:"failure_ratio"`
	MinCalls            int           `yaml:"min_calls"`
	Window              time.Duration `yaml:"window"`
	SlowCall            time.Duration `yaml:"slow_call"`
	OpenFor             time.Duration `yaml:"open_for"`
	Probes              int           `yaml:"probes"`
	// SlowStart ramps calls back after closing; default open_for/2, negative off.
	SlowStart time.Duration `yaml:"slow_start"`
	// FailureCodes are gRPC code names (UNAVAILABLE, Internal, ...).
	FailureCodes []string `yaml:"failure_codes"`
}

// RouteYAML is one model's route (YAML routes:).
type RouteYAML struct {
	// Model is the model name clients send.
	Model string `yaml:"model"`
	// Upstream names the primary; default: the default upstream.
	Upstream string `yaml:"upstream"`
	// Fallback is the lighter model used while the primary is in trouble.
	Fallback *FallbackYAML `yaml:"fallback"`
	// Mode is "fallback" (default) or "cascade" (edge first).
	Mode string `yaml:"mode"`
	// Cascade configures cascade mode.
	Cascade *CascadeYAML `yaml:"cascade"`
	// HedgeAfter is a duration, "auto" (default: 3x the primary's recent
	// p99.9, at least 10ms; no hedge until it is known) or "off".
	HedgeAfter string `yaml:"hedge_after"`
	// Idempotent (default true): false means never sent twice.
	Idempotent *bool `yaml:"idempotent"`
	// MaxInFlight caps the model's calls in progress; 0 none.
	MaxInFlight int `yaml:"max_in_flight"`
	// ShedOnDeadline rejects calls whose deadline is shorter than the
	// primary's median latency (or sends them to the fallback).
	ShedOnDeadline bool `yaml:"shed_on_deadline"`
}

// FallbackYAML names the fallback: an upstream by name or an address, and
// a model name (default: the same) and version (default: none).
type FallbackYAML struct {
	Upstream string `yaml:"upstream"`
	Address  string `yaml:"address"`
	Model    string `yaml:"model"`
	Version  string `yaml:"version"`
}

// CascadeYAML is proxy.CascadeConfig.
type CascadeYAML struct {
	Output    string  `yaml:"output"`
	Threshold float64 `yaml:"threshold"`
}

// RetryBudgetYAML is proxy.BudgetConfig.
type RetryBudgetYAML struct {
	Ratio        float64 `yaml:"ratio"`
	MinPerSecond int     `yaml:"min_per_second"`
}

// parseFallbackFlag reads one --fallback value, MODEL=HOST:PORT[/FALLBACK_MODEL[:VERSION]].
func parseFallbackFlag(v string) (RouteYAML, error) {
	model, rest, ok := strings.Cut(v, "=")
	if !ok || model == "" || rest == "" {
		return RouteYAML{}, fmt.Errorf("%q is not MODEL=HOST:PORT[/FALLBACK_MODEL[:VERSION]]", v)
	}
	addr, fbModel, _ := strings.Cut(rest, "/")
	fb := &FallbackYAML{Address: addr}
	if fbModel != "" {
		fb.Model, fb.Version, _ = strings.Cut(fbModel, ":")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return RouteYAML{}, fmt.Errorf("%q: %q is not host:port", v, addr)
	}
	return RouteYAML{Model: model, Fallback: fb}, nil
}

// validateRouting checks upstreams:, routes:, breaker: and retry_budget:,
// naming each bad field.
func (c *Config) validateRouting() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	names := map[string]bool{}
	for i, u := range c.Upstreams {
		f := fmt.Sprintf("upstreams[%d]", i)
		switch {
		case u.Name == "":
			bad(f+".name", "required")
		case names[u.Name]:
			bad(f+".name", "%q named twice", u.Name)
		}
		names[u.Name] = true
		if _, _, err := net.SplitHostPort(u.Address); err != nil {
			bad(f+".address", "%q is not host:port", u.Address)
		}
		if u.Conns < 0 || u.Conns > proxy.MaxUpstreamConns {
			bad(f+".conns", "must be between 1 and %d, got %d", proxy.MaxUpstreamConns, u.Conns)
		}
		if u.Breaker != nil {
			if _, err := u.Breaker.config(); err != nil {
				bad(f+".breaker", "%v", err)
			}
		}
	}
	if c.Breaker != nil {
		if _, err := c.Breaker.config(); err != nil {
			bad("breaker", "%v", err)
		}
	}
	if c.RetryBudget.Ratio > 1 {
		bad("retry_budget.ratio", "must be at most 1, got %v", c.RetryBudget.Ratio)
	}
	if c.RetryBudget.MinPerSecond < 0 {
		bad("retry_budget.min_per_second", "must be positive, got %d", c.RetryBudget.MinPerSecond)
	}
	models := map[string]bool{}
	for i, r := range c.Routes {
		f := fmt.Sprintf("routes[%d]", i)
		if r.Model != "" {
			f = fmt.Sprintf("routes[%s]", r.Model)
		}
		switch {
		case r.Model == "":
			bad(f+".model", "required")
		case models[r.Model]:
			bad(f+".model", "%q has two routes", r.Model)
		}
		models[r.Model] = true
		if r.Upstream != "" && !names[r.Upstream] {
			bad(f+".upstream", "no upstream named %q in upstreams", r.Upstream)
		}
		if fb := r.Fallback; fb != nil {
			switch {
			case fb.Upstream != "" && fb.Address != "":
				bad(f+".fallback", "upstream and address are exclusive")
			case fb.Upstream != "" && !names[fb.Upstream]:
				bad(f+".fallback.upstream", "no upstream named %q in upstreams", fb.Upstream)
			case fb.Address != "":
				if _, _, err := net.SplitHostPort(fb.Address); err != nil {
					bad(f+".fallback.address", "%q is not host:port", fb.Address)
				}
			case fb.Upstream == "" && fb.Model == "":
				bad(f+".fallback", "needs an upstream, an address or another model name")
			}
		}
		switch r.Mode {
		case "", "fallback":
		case "cascade":
			switch {
			case r.Fallback == nil:
				bad(f+".mode", "cascade needs a fallback (the edge model)")
			case r.Cascade == nil || r.Cascade.Output == "":
				bad(f+".cascade.output", "required in cascade mode (the edge model's probabilities tensor)")
			case r.Cascade.Threshold <= 0 || r.Cascade.Threshold > 1:
				bad(f+".cascade.threshold", "must be in (0, 1], got %v", r.Cascade.Threshold)
			}
		default:
			bad(f+".mode", "must be fallback or cascade, got %q", r.Mode)
		}
		if _, err := hedgeAfter(r.HedgeAfter); err != nil {
			bad(f+".hedge_after", "%v", err)
		}
		if r.MaxInFlight < 0 {
			bad(f+".max_in_flight", "must be 0 (no cap) or positive, got %d", r.MaxInFlight)
		}
	}
	return errs
}

// hedgeAfter reads hedge_after: "" or "auto" is 0 (automatic), "off" is
// negative, else a positive duration.
func hedgeAfter(v string) (time.Duration, error) {
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

// config converts and validates the YAML breaker.
func (b *BreakerYAML) config() (proxy.BreakerConfig, error) {
	bc := proxy.BreakerConfig{
		ConsecutiveFailures: b.ConsecutiveFailures, FailureRatio: b.FailureRatio, MinCalls: b.MinCalls,
		Window: b.Window, SlowCall: b.SlowCall, OpenFor: b.OpenFor, Probes: b.Probes, SlowStart: b.SlowStart,
	}
	for _, name := range b.FailureCodes {
		code, ok := codeByName(name)
		if !ok {
			return bc, fmt.Errorf("failure_codes: unknown gRPC code %q", name)
		}
		bc.FailureCodes = append(bc.FailureCodes, code)
	}
	return bc, bc.Validate()
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

// routing is the set of upstreams and the router built from the config.
type routing struct {
	def     *proxy.Upstream
	defAddr string
	byName  map[string]*proxy.Upstream
	all     []*proxy.Upstream
	router  *proxy.Router // nil when nothing is routed
}

// Close closes the router and every upstream's connections.
func (rt *routing) Close() error {
	var errs []error
	if rt.router != nil {
		errs = append(errs, rt.router.Close())
	}
	for _, u := range rt.all {
		errs = append(errs, u.Close())
	}
	return errors.Join(errs...)
}

// startRouting dials every upstream and builds the router.
func startRouting(cfg Config, creds credentials.TransportCredentials, mon *monitor.Registry, log *slog.Logger) (*routing, error) {
	rt := &routing{byName: map[string]*proxy.Upstream{}}
	byAddr := map[string]*proxy.Upstream{}
	dial := func(name, addr string, conns int) (*proxy.Upstream, error) {
		if conns <= 0 {
			conns = cfg.UpstreamConns
		}
		up, err := proxy.DialUpstream(addr, proxy.UpstreamOptions{
			Name: name, Credentials: creds, MaxMsgSize: cfg.MaxMessageBytes, Conns: conns,
			Keepalive: keepalive.ClientParameters{Time: cfg.UpstreamKeepaliveTime},
		})
		if err != nil {
			return nil, err
		}
		rt.all = append(rt.all, up)
		byAddr[addr] = up
		return up, nil
	}
	breakers := map[*proxy.Upstream]proxy.BreakerConfig{}
	fail := func(err error) (*routing, error) {
		rt.Close()
		return nil, err
	}
	if cfg.Upstream != "" {
		up, err := dial(cfg.Upstream, cfg.Upstream, 0)
		if err != nil {
			return fail(err)
		}
		rt.def, rt.defAddr = up, cfg.Upstream
		if cfg.Breaker != nil {
			bc, _ := cfg.Breaker.config()
			breakers[up] = bc
		}
	}
	for _, u := range cfg.Upstreams {
		up, err := dial(u.Name, u.Address, u.Conns)
		if err != nil {
			return fail(err)
		}
		rt.byName[u.Name] = up
		if rt.def == nil {
			rt.def, rt.defAddr = up, u.Address
		}
		if u.Breaker != nil {
			bc, _ := u.Breaker.config()
			breakers[up] = bc
		}
	}
	var routes []proxy.RouteConfig
	for _, r := range cfg.Routes {
		rc := proxy.RouteConfig{Model: r.Model, MaxInFlight: r.MaxInFlight, ShedOnDeadline: r.ShedOnDeadline,
			NonIdempotent: r.Idempotent != nil && !*r.Idempotent}
		rc.HedgeAfter, _ = hedgeAfter(r.HedgeAfter)
		if r.Upstream != "" {
			rc.Upstream = rt.byName[r.Upstream]
		} else {
			rc.Upstream = rt.def
		}
		if fb := r.Fallback; fb != nil {
			t := &proxy.FallbackTarget{Model: fb.Model, Version: fb.Version}
			switch {
			case fb.Upstream != "":
				t.Upstream = rt.byName[fb.Upstream]
			case fb.Address != "":
				if t.Upstream = byAddr[fb.Address]; t.Upstream == nil {
					up, err := dial(fb.Address, fb.Address, 0)
					if err != nil {
						return fail(err)
					}
					t.Upstream = up
				}
			}
			rc.Fallback = t
		}
		if r.Mode == "cascade" {
			rc.Cascade = &proxy.CascadeConfig{Output: r.Cascade.Output, Threshold: r.Cascade.Threshold}
		}
		routes = append(routes, rc)
	}
	if len(routes) == 0 && len(breakers) == 0 {
		return rt, nil
	}
	router, err := proxy.NewRouter(proxy.RouterOptions{
		Routes: routes, Breakers: breakers,
		Budget:  proxy.BudgetConfig{Ratio: cfg.RetryBudget.Ratio, MinPerSecond: cfg.RetryBudget.MinPerSecond},
		Latency: proxy.PrimaryLatency(mon),
		Logger:  log,
	})
	if err != nil {
		return fail(err)
	}
	rt.router = router
	return rt, nil
}

// describe is the start line's tail: the routed models and their
// fallbacks, or nothing.
func (rt *routing) describe() string {
	if rt.router == nil {
		return ""
	}
	routes, breakers := rt.router.Status()
	var parts []string
	for _, r := range routes {
		if r.Fallback != "" {
			parts = append(parts, r.Model+"->"+strings.ReplaceAll(r.Fallback, " on ", "@"))
		} else {
			parts = append(parts, r.Model)
		}
	}
	return fmt.Sprintf(" routes=%s breakers=%d", strings.Join(parts, ","), len(breakers))
}
