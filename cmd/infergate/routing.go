package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/proxy"
	"github.com/infergate/infergate/proxy/route"
)

// routing is the upstreams and the router built from the config.
type routing struct {
	*proxy.Routing
	// router is built whatever the configuration, empty while nothing
	// is routed (an empty table costs a call nothing), so that a reload
	// can add routes.
	router *route.Router
}

// Close closes the router and every upstream's connections.
func (rt *routing) Close() error {
	var errs []error
	errs = append(errs, rt.router.Close())
	return errors.Join(append(errs, rt.Routing.Close())...)
}

// startRouting dials the upstreams of the plan validate made and builds
// the router over them.
func startRouting(cfg Config, creds credentials.TransportCredentials, mon *monitor.Registry, log *slog.Logger) (*routing, error) {
	ups, err := proxy.OpenRouting(cfg.routes, proxy.UpstreamOptions{
		Credentials: creds, MaxMsgSize: cfg.MaxMessageBytes, Conns: cfg.UpstreamConns,
		Keepalive: keepalive.ClientParameters{Time: cfg.UpstreamKeepaliveTime},
		Resolver:  dnsResolver(cfg.UpstreamDNSServer),
	}, proxy.DialUpstream)
	if err != nil {
		return nil, err
	}
	rt := &routing{Routing: ups}
	opts := ups.Router
	opts.Latency = route.PrimaryLatency(mon)
	opts.Logger = log
	if rt.router, err = route.NewRouter(opts); err != nil {
		return nil, errors.Join(err, rt.Close())
	}
	return rt, nil
}

// describe is the start line's tail: the routed models and their
// fallbacks, or nothing.
func (rt *routing) describe() string {
	routes, breakers := rt.router.Status()
	if len(routes) == 0 && len(breakers) == 0 {
		return ""
	}
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

// dnsResolver resolves dns:/// upstreams' names at server (host:port);
// nil, the system's resolver, when server is "".
func dnsResolver(server string) *net.Resolver {
	if server == "" {
		return nil
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// slowEndpoint is the router's SlowEndpoint as the correlator reads it.
func slowEndpoint(r *route.Router, model string) (correlate.SlowEndpoint, bool) {
	s, ok := r.SlowEndpoint(model)
	if !ok {
		return correlate.SlowEndpoint{}, false
	}
	return correlate.SlowEndpoint{Upstream: s.Upstream, Endpoint: s.Endpoint, P99: s.P99, PoolP99: s.PoolP99,
		Ratio: s.Ratio(), Answers: s.Answers, Note: s.String()}, true
}
