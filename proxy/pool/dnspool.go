package pool

import (
	"context"
	"net"
	"slices"
	"strings"
	"time"
)

// A dns:///name:port upstream is a pool: each address the name resolves to
// is an endpoint, re-resolved every UpstreamOptions.ResolveEvery, as a
// Kubernetes headless Service lists its ready pods. An address that
// appears takes calls at its next resolution; one that disappears is
// retired (SetEndpoints): its calls in flight finish, it gets no new one.
// A name that resolves to nothing (a Service with no ready pod yet) keeps
// the endpoints it had; at start it is one endpoint dialled through
// gRPC's own resolver, until the name resolves.

// DefaultResolveEvery is how often a dns:/// upstream's name is resolved
// again.
const DefaultResolveEvery = 5 * time.Second

// PlainHostPort says whether target is host:port with no scheme, what a
// movable upstream and the fast path dial.
func PlainHostPort(target string) bool {
	_, _, err := net.SplitHostPort(target)
	return err == nil && !strings.Contains(target, "/")
}

// DNSTarget returns the host and port of a dns:///host:port target.
func DNSTarget(target string) (host, port string, ok bool) {
	rest, ok := strings.CutPrefix(target, "dns:///")
	if !ok {
		return "", "", false
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil || host == "" || strings.Contains(rest, "/") {
		return "", "", false
	}
	return host, port, true
}

// ResolveAddrs is the sorted host:port of each address host resolves to.
func ResolveAddrs(ctx context.Context, r *net.Resolver, host, port string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := r.LookupHost(ctx, host)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip, port))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ResolveLoop re-resolves host every period until ctx ends, and calls
// set with the addresses found (host:port each, sorted) whenever they
// change; a set that fails is called again at the next change.
func ResolveLoop(ctx context.Context, r *net.Resolver, host, port string, every time.Duration, set func(addrs []string) error) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last []string
	for {
		if addrs, err := ResolveAddrs(ctx, r, host, port); err == nil && len(addrs) > 0 && !slices.Equal(addrs, last) {
			if set(addrs) == nil {
				last = addrs
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
