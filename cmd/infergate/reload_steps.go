package main

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/tracing"
)

// logLevelStep sets the log level (log.level, --log-level) live.
func logLevelStep(level *slog.LevelVar) reloadStep {
	return reloadStep{name: "log", prepare: func(old, next *Config) (func() string, func(), error) {
		if old.Log.Level == next.Log.Level {
			return nil, nil, nil
		}
		var l slog.Level
		if err := l.UnmarshalText([]byte(next.Log.Level)); err != nil {
			return nil, nil, fmt.Errorf("log.level: %w", err)
		}
		return func() string {
			level.Set(l)
			return "log level " + next.Log.Level
		}, nil, nil
	}}
}

// tracingStep swaps the tracer provider's sampler (tracing.sample_ratio,
// tracing.parent_based, tracing.max_spans_per_second): spans started from
// then on follow it. Tracing
// turned on or off, another exporter, endpoint or service name wait for a
// restart (restartOnly). t is nil when tracing is off: there is nothing
// to sample, and the settings take effect when a restart turns it on.
func tracingStep(t *tracing.Tracing) reloadStep {
	return reloadStep{name: "tracing", prepare: func(old, next *Config) (func() string, func(), error) {
		o, n := old.Tracing, next.Tracing
		if t == nil || (o.SampleRatio == n.SampleRatio && o.ParentBased == n.ParentBased && o.MaxSpansPerSecond == n.MaxSpansPerSecond) {
			return nil, nil, nil
		}
		return func() string {
			t.SetSampler(n)
			return fmt.Sprintf("tracing sampler: sample_ratio %g, parent_based %t, max_spans_per_second %g",
				n.SampleRatio, n.ParentBased, n.MaxSpansPerSecond)
		}, nil, nil
	}}
}

// alertingStep swaps the alert engine's configuration (rules, route,
// receivers, inhibition, schedules, templates, SLOs) between two
// evaluation steps.
func alertingStep(e *alert.Engine) reloadStep {
	return reloadStep{name: "alerting", prepare: func(old, next *Config) (func() string, func(), error) {
		if reflect.DeepEqual(alertingView(old.alerts), alertingView(next.alerts)) {
			return nil, nil, nil
		}
		commit, abort, err := e.Stage(next.alerts)
		if err != nil {
			return nil, nil, err
		}
		return func() string {
			ended := commit()
			if len(ended) == 0 {
				return "alerting replaced"
			}
			return "alerting replaced; alerts of changed rules resolved: " + strings.Join(ended, ",")
		}, abort, nil
	}}
}

// alertingView is what of an alerting config a reload compares: its
// exported settings (the compiled rules follow from them).
func alertingView(c *alert.Config) alert.Config {
	if c == nil {
		return alert.Config{}
	}
	// evaluation_interval, state_file and baseline are read at start.
	return alert.Config{SLO: c.SLO, Rules: c.Rules, Route: c.Route, Receivers: c.Receivers, Inhibit: c.Inhibit,
		Schedules: c.Schedules, ExternalURL: c.ExternalURL}
}

// batchingStep applies the batching policy and knobs per model, turning
// batching on or off as well: the batcher is built at start even when it
// batches nothing (newBatcher). discover starts the discovery of the
// upstream's batching (max_batch_size, the auto models) when a reload
// turns batching on; it runs once, whatever calls it.
func batchingStep(b *batcher.Batcher, discover func()) reloadStep {
	return reloadStep{name: "batching", prepare: func(old, next *Config) (func() string, func(), error) {
		if b == nil || (reflect.DeepEqual(old.Batching, next.Batching) &&
			reflect.DeepEqual(nonIdempotentModels(old.RoutingConfig), nonIdempotentModels(next.RoutingConfig))) {
			return nil, nil, nil
		}
		cfg := next.Batching.Config()
		cfg.NonIdempotent = nonIdempotentModels(next.RoutingConfig)
		check := next.Batching.Config() // Validate fills defaults in place
		if err := check.Validate(); err != nil {
			return nil, nil, err
		}
		return func() string {
			changed, err := b.Apply(cfg)
			if err != nil { // checked above: not expected
				return "batching not applied: " + err.Error()
			}
			if batchingOn(next.Batching) {
				discover()
			}
			if len(changed) == 0 {
				return "batching unchanged"
			}
			return "batching policy of " + strings.Join(changed, ",")
		}, nil, nil
	}}
}

// routingStep moves the default upstream (upstream:, or the first of
// upstreams: without it) when its address or name changed, and rebuilds
// the router's table (routes, fallbacks, cascades, breakers, retry
// budget, shedding, hedging) over the upstreams: an unchanged upstream
// keeps its connections, a new one is dialled, and one no longer used is
// closed after drain (shutdown_timeout), when the calls on it have ended.
//
// The default upstream stays the same object (the Director's, readiness
// probes and batching discovery hold it): its connections go to the new
// address and gRPC closes the old ones once their calls ended
// (proxy.Upstream.Move); the fast path drains its pool to the old address
// the same way. Its metric label moves with it (it is the address, unless
// the upstream is named), and its breaker starts closed: neither the
// series nor the breaker's verdict of one server belong to another.
func routingStep(rt *routing, creds credentials.TransportCredentials, drain time.Duration, log *slog.Logger) reloadStep {
	return reloadStep{name: "routing", prepare: func(old, next *Config) (func() string, func(), error) {
		if reflect.DeepEqual(old.RoutingConfig, next.RoutingConfig) {
			return nil, nil, nil
		}
		name, addr := next.routes.Default()
		move := func() string {
			up := rt.Default
			if up.Address() == addr && up.Name() == name {
				return ""
			}
			if !up.Movable() || !proxy.PlainEndpoints(addr) {
				return "" // restartPending names it
			}
			from := up.Address()
			if err := up.Move(addr, name); err != nil { // checked above: not expected
				return "default upstream not moved: " + err.Error()
			}
			rt.DefaultAddress = addr
			return fmt.Sprintf("default upstream %s -> %s", from, addr)
		}
		ups, dropped, err := proxy.ReopenRouting(next.routes, rt.Routing, proxy.UpstreamOptions{
			Credentials: creds, MaxMsgSize: old.MaxMessageBytes, Conns: old.UpstreamConns,
			Keepalive: keepalive.ClientParameters{Time: old.UpstreamKeepaliveTime},
			Resolver:  dnsResolver(old.UpstreamDNSServer),
		}, proxy.DialUpstream)
		if err != nil {
			return nil, nil, err
		}
		had := map[*proxy.Upstream]bool{}
		for _, u := range rt.Upstreams {
			had[u] = true
		}
		abort := func() {
			for _, u := range ups.Upstreams {
				if !had[u] {
					u.Close()
				}
			}
		}
		return func() string {
			// Moved first, so that the new table gives the moved
			// upstream a new breaker.
			moved := move()
			ups.DefaultAddress = rt.DefaultAddress
			if err := rt.router.Apply(ups.Router); err != nil { // Plan checked it: not expected
				abort()
				return "routes not applied: " + err.Error()
			}
			rt.Routing = ups
			if len(dropped) > 0 {
				// Calls routed there before the swap finish first.
				time.AfterFunc(drain, func() {
					for _, u := range dropped {
						if err := u.Close(); err != nil {
							log.Warn("reload: closing an upstream no longer used", "upstream", u.Name(), "err", err)
						}
					}
				})
			}
			did := fmt.Sprintf("routes (%d upstreams, %d dropped)", len(ups.Upstreams), len(dropped))
			if moved != "" {
				did = moved + "; " + did
			}
			return did
		}, abort, nil
	}}
}

// modelCheck runs checkModels over the configuration in force: at start,
// and again at each reload that changes routes or alerting, cancelling
// the check of the configuration before (it may still wait for the
// upstream's index).
type modelCheck struct {
	ctx    context.Context
	rt     *routing
	log    *slog.Logger
	cancel context.CancelFunc
}

func (m *modelCheck) check(c Config) {
	if m.cancel != nil {
		m.cancel()
	}
	var ctx context.Context
	ctx, m.cancel = context.WithCancel(m.ctx)
	checkModels(ctx, m.rt.Router.Routes, c.alerts, m.rt.Default, m.log)
}

// step re-checks after a reload; it changes nothing that serves.
func (m *modelCheck) step() reloadStep {
	return reloadStep{name: "model check", prepare: func(old, next *Config) (func() string, func(), error) {
		if reflect.DeepEqual(old.RoutingConfig, next.RoutingConfig) && reflect.DeepEqual(alertingView(old.alerts), alertingView(next.alerts)) {
			return nil, nil, nil
		}
		return func() string { m.check(*next); return "" }, nil, nil
	}}
}
